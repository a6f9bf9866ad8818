package settings

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func certDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"tls.crt", "tls.key"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600))
	}
	return dir
}

func TestControllerReadsEnvironment(t *testing.T) {
	dir := certDir(t)
	c, err := outsidePod(t, nil, env(map[string]string{
		"LEADER_ELECTION": "false", "WEBHOOK_CERT_DIR": dir, "MAX_CONCURRENT_RECONCILES": "7",
		"CONTROLLER_NAMESPACE": "capi-system", "LOG_FORMAT": "text", "LOG_LEVEL": "debug",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "METRICS_BIND_ADDRESS": "127.0.0.1:9090", "METRICS_SECURE": "false",
		"HEALTH_PROBE_BIND_ADDRESS": "0", "TUNNEL_IMAGE": "registry.example.com/hcp/tunnel:v1", "MAX_CONCURRENT_BACKUPS": "4",
		"ETCD_RESTORE_IMAGE": "registry.example.com/hcp/etcd-restore:v1", "ALLOWED_IMAGE_REGISTRIES": "registry.k8s.io, registry.example.com/hcp",
	}))
	require.NoError(t, err)
	assert.False(t, c.LeaderElection)
	assert.Equal(t, dir, c.CertDir)
	assert.Equal(t, 7, c.MaxConcurrentReconciles)
	assert.Equal(t, 4, c.MaxConcurrentBackups)
	assert.Equal(t, "capi-system", c.Namespace)
	assert.Equal(t, "text", c.LogFormat)
	assert.Equal(t, "debug", c.LogLevel)
	assert.Equal(t, "http://collector:4317", c.OTLPEndpoint)
	assert.Equal(t, "127.0.0.1:9090", c.MetricsAddr)
	assert.False(t, c.MetricsSecure)
	assert.Equal(t, "0", c.HealthAddr)
	assert.Equal(t, "registry.example.com/hcp/tunnel:v1", c.TunnelImage)
	assert.Equal(t, "registry.example.com/hcp/etcd-restore:v1", c.EtcdRestoreImage)
	assert.Equal(t, "registry.k8s.io, registry.example.com/hcp", c.AllowedImageRegistries.String())
}

// outsidePod parses as a process outside a pod does, wherever the test runs.
func outsidePod(t *testing.T, args []string, getenv func(string) string) (Controller, error) {
	t.Helper()
	return parseController(args, getenv, nil, filepath.Join(t.TempDir(), "namespace"))
}

func TestFlagsWinOverEnvironment(t *testing.T) {
	c, err := outsidePod(t, []string{"--max-concurrent-reconciles=3", "--leader-election=true", "--enable-webhooks=false", "--controller-namespace=ops"},
		env(map[string]string{"MAX_CONCURRENT_RECONCILES": "7", "LEADER_ELECTION": "false", "CONTROLLER_NAMESPACE": "capi-system"}))
	require.NoError(t, err)
	assert.Equal(t, 3, c.MaxConcurrentReconciles)
	assert.True(t, c.LeaderElection)
	assert.Equal(t, "ops", c.Namespace)
}

// The defaults are the README's: leader election on, ten control planes in
// parallel, JSON at info level, webhooks served.
func TestDefaults(t *testing.T) {
	c, err := outsidePod(t, nil, env(map[string]string{"CONTROLLER_NAMESPACE": "ops", "WEBHOOK_CERT_DIR": certDir(t)}))
	require.NoError(t, err)
	assert.True(t, c.LeaderElection)
	assert.True(t, c.EnableWebhooks)
	assert.Equal(t, 10, c.MaxConcurrentReconciles)
	assert.Equal(t, 2, c.MaxConcurrentBackups)
	assert.Equal(t, "json", c.LogFormat)
	assert.Equal(t, "info", c.LogLevel)
	assert.Equal(t, ":8443", c.MetricsAddr)
	assert.True(t, c.MetricsSecure, "metrics only to those the management cluster authorizes")
	assert.Equal(t, ":8081", c.HealthAddr)
	assert.Equal(t, 9443, c.Port)
	assert.Empty(t, c.Kubeconfig)
	assert.Empty(t, c.AllowedImageRegistries, "any registry")
}

// Manifests in use say LOG_LEVEL=INFO or DEBUG.
func TestLogLevelInAnyCase(t *testing.T) {
	for _, level := range []string{"INFO", "DEBUG", "Warn", "error", "5"} {
		c, err := outsidePod(t, []string{"--enable-webhooks=false", "--leader-election=false"}, env(map[string]string{"LOG_LEVEL": level}))
		require.NoError(t, err, level)
		assert.Equal(t, level, c.LogLevel)
	}
}

// In a pod the lease lives in the pod's namespace; CONTROLLER_NAMESPACE
// still wins.
func TestNamespaceDetectedInAPod(t *testing.T) {
	file := filepath.Join(t.TempDir(), "namespace")
	require.NoError(t, os.WriteFile(file, []byte("hosted-control-plane-system\n"), 0o600))
	c, err := parseController([]string{"--enable-webhooks=false"}, env(nil), nil, file)
	require.NoError(t, err)
	assert.Equal(t, "hosted-control-plane-system", c.Namespace)
	c, err = parseController([]string{"--enable-webhooks=false"}, env(map[string]string{"CONTROLLER_NAMESPACE": "ops"}), nil, file)
	require.NoError(t, err)
	assert.Equal(t, "ops", c.Namespace)
}

// Outside a pod, leader election needs a namespace given; without leader
// election none is needed.
func TestLeaderElectionOutsideAPodNeedsANamespace(t *testing.T) {
	_, err := outsidePod(t, []string{"--enable-webhooks=false"}, env(nil))
	require.ErrorContains(t, err, "leader election needs a namespace for its lease, and outside a pod none is detected: "+
		"set CONTROLLER_NAMESPACE/--controller-namespace, or LEADER_ELECTION=false/--leader-election=false")
	c, err := outsidePod(t, []string{"--enable-webhooks=false"}, env(map[string]string{"LEADER_ELECTION": "false"}))
	require.NoError(t, err)
	assert.Empty(t, c.Namespace)
}

// --kubeconfig is accepted by both binaries, like any controller-runtime
// manager's, and must name a file.
func TestKubeconfigFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(file, []byte("apiVersion: v1\nkind: Config\n"), 0o600))
	c, err := outsidePod(t, []string{"--kubeconfig", file, "--enable-webhooks=false", "--leader-election=false"}, env(nil))
	require.NoError(t, err)
	assert.Equal(t, file, c.Kubeconfig)
	e, err := ParseExtension([]string{"--kubeconfig=" + file}, env(map[string]string{"WEBHOOK_CERT_DIR": certDir(t)}), nil)
	require.NoError(t, err)
	assert.Equal(t, file, e.Kubeconfig)

	_, err = ParseExtension([]string{"--kubeconfig=/nonexistent/kubeconfig"}, env(map[string]string{"WEBHOOK_CERT_DIR": certDir(t)}), nil)
	assert.ErrorContains(t, err, `--kubeconfig "/nonexistent/kubeconfig": no such file or directory: give the management cluster's kubeconfig file`)
}

func TestBadSettingsNameTheVariable(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		args []string
		want string
	}{
		"bool":    {env: map[string]string{"LEADER_ELECTION": "yes please"}, want: `LEADER_ELECTION="yes please": use true or false`},
		"int":     {env: map[string]string{"MAX_CONCURRENT_RECONCILES": "many"}, want: `MAX_CONCURRENT_RECONCILES="many": use a whole number`},
		"range":   {env: map[string]string{"MAX_CONCURRENT_RECONCILES": "0"}, want: "MAX_CONCURRENT_RECONCILES/--max-concurrent-reconciles 0: use 1 to 100"},
		"format":  {env: map[string]string{"LOG_FORMAT": "xml"}, want: `LOG_FORMAT/--log-format "xml": use json or text`},
		"level":   {env: map[string]string{"LOG_LEVEL": "loud"}, want: "LOG_LEVEL/--log-level"},
		"address": {env: map[string]string{"METRICS_BIND_ADDRESS": "8080"}, want: `METRICS_BIND_ADDRESS/--metrics-bind-address "8080": use host:port`},
		"otel":    {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}, want: "use an http:// or https:// URL"},
		"certs":   {env: map[string]string{"WEBHOOK_CERT_DIR": "/nonexistent", "ENABLE_WEBHOOKS": "true"}, want: `WEBHOOK_CERT_DIR/--webhook-cert-dir "/nonexistent" has no tls.crt`},
		"port":    {args: []string{"--webhook-port=70000", "--enable-webhooks=false"}, want: "WEBHOOK_PORT/--webhook-port 70000"},
		"image":   {env: map[string]string{"TUNNEL_IMAGE": "Tunnel:latest"}, want: `TUNNEL_IMAGE/--tunnel-image "Tunnel:latest"`},
		"restoreImage": {
			env: map[string]string{"ETCD_RESTORE_IMAGE": "Restore:latest"}, want: `ETCD_RESTORE_IMAGE/--etcd-restore-image "Restore:latest"`,
		},
		"registries": {
			env:  map[string]string{"ALLOWED_IMAGE_REGISTRIES": "registry.k8s.io,https://registry.example.com"},
			want: `ALLOWED_IMAGE_REGISTRIES/--allowed-image-registries: "https://registry.example.com": use a registry host`,
		},
		"watchFilter": {env: map[string]string{"WATCH_FILTER": "shard a"}, want: `WATCH_FILTER/--watch-filter "shard a": a valid label must be`},
		"namespaces":  {env: map[string]string{"WATCH_NAMESPACES": "tenants-a,Tenants_B"}, want: `WATCH_NAMESPACES/--namespaces "Tenants_B": a lowercase RFC 1123 label`},
		"unknownFlag": {args: []string{"--leader-elect"}, want: "flag provided but not defined: -leader-elect"},
		"positional":  {args: []string{"--enable-webhooks=false", "run"}, want: `unexpected arguments ["run"]`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := outsidePod(t, tc.args, env(tc.env))
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestHelpListsEnvironmentVariables(t *testing.T) {
	var out bytes.Buffer
	_, err := ParseController([]string{"--help"}, env(nil), &out)
	require.ErrorIs(t, err, flag.ErrHelp)
	for _, v := range []string{
		"LEADER_ELECTION", "WEBHOOK_CERT_DIR", "MAX_CONCURRENT_RECONCILES", "CONTROLLER_NAMESPACE",
		"LOG_FORMAT", "LOG_LEVEL", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "METRICS_BIND_ADDRESS", "HEALTH_PROBE_BIND_ADDRESS",
		"TUNNEL_IMAGE", "ETCD_RESTORE_IMAGE", "ALLOWED_IMAGE_REGISTRIES", "WORKLOAD_HEALTH_PROBE_INTERVAL", "PROFILER_ADDRESS",
	} {
		assert.Contains(t, out.String(), "(env "+v+")")
	}
	assert.Contains(t, out.String(), "-kubeconfig string\n")
	assert.Contains(t, out.String(), "env KUBECONFIG")

	out.Reset()
	_, err = ParseExtension([]string{"-h"}, env(nil), &out)
	require.ErrorIs(t, err, flag.ErrHelp)
	assert.Contains(t, out.String(), "-kubeconfig string\n")
}

func TestExtensionNeedsCertificates(t *testing.T) {
	_, err := ParseExtension(nil, env(map[string]string{"WEBHOOK_CERT_DIR": t.TempDir()}), nil)
	assert.ErrorContains(t, err, "has no tls.key")
	e, err := ParseExtension([]string{"--webhook-port=9444"}, env(map[string]string{"WEBHOOK_CERT_DIR": certDir(t)}), nil)
	require.NoError(t, err)
	assert.Equal(t, 9444, e.Port)
}

// Both binaries read MIN_BACKUP_INTERVAL, an hour unless set, within 1m to
// 24h; a bad value names the variable.
func TestMinBackupInterval(t *testing.T) {
	quiet := []string{"--enable-webhooks=false", "--leader-election=false"}
	c, err := outsidePod(t, quiet, env(nil))
	require.NoError(t, err)
	assert.Equal(t, time.Hour, c.MinBackupInterval)
	c, err = outsidePod(t, quiet, env(map[string]string{"MIN_BACKUP_INTERVAL": "6h"}))
	require.NoError(t, err)
	assert.Equal(t, 6*time.Hour, c.MinBackupInterval)
	c, err = outsidePod(t, append(quiet, "--min-backup-interval=15m"), env(map[string]string{"MIN_BACKUP_INTERVAL": "6h"}))
	require.NoError(t, err)
	assert.Equal(t, 15*time.Minute, c.MinBackupInterval, "the flag wins")
	e, err := ParseExtension(nil, env(map[string]string{"WEBHOOK_CERT_DIR": certDir(t), "MIN_BACKUP_INTERVAL": "30m"}), nil)
	require.NoError(t, err)
	assert.Equal(t, 30*time.Minute, e.MinBackupInterval)

	for value, want := range map[string]string{
		"hourly": `MIN_BACKUP_INTERVAL="hourly": use a duration such as 1h or 30m`,
		"30s":    "MIN_BACKUP_INTERVAL/--min-backup-interval 30s: use 1m to 24h",
		"-1h":    "MIN_BACKUP_INTERVAL/--min-backup-interval -1h0m0s: use 1m to 24h",
		"48h":    "MIN_BACKUP_INTERVAL/--min-backup-interval 48h0m0s: use 1m to 24h",
	} {
		_, err := outsidePod(t, quiet, env(map[string]string{"MIN_BACKUP_INTERVAL": value}))
		assert.ErrorContains(t, err, want, value)
		_, err = ParseExtension(nil, env(map[string]string{"WEBHOOK_CERT_DIR": certDir(t), "MIN_BACKUP_INTERVAL": value}), nil)
		assert.ErrorContains(t, err, want, value)
	}
}

// MUST_ROLL_INTERVAL is ten minutes unless set, within 0 to a week; a bad
// value names the variable.
func TestMustRollInterval(t *testing.T) {
	quiet := []string{"--enable-webhooks=false", "--leader-election=false"}
	c, err := outsidePod(t, quiet, env(nil))
	require.NoError(t, err)
	assert.Equal(t, 10*time.Minute, c.MustRollInterval)
	c, err = outsidePod(t, quiet, env(map[string]string{"MUST_ROLL_INTERVAL": "0s"}))
	require.NoError(t, err)
	assert.Zero(t, c.MustRollInterval)
	for value, want := range map[string]string{
		"-1m":  "MUST_ROLL_INTERVAL/--must-roll-interval -1m0s: use 0 to 168h",
		"200h": "MUST_ROLL_INTERVAL/--must-roll-interval 200h0m0s: use 0 to 168h",
	} {
		_, err := outsidePod(t, quiet, env(map[string]string{"MUST_ROLL_INTERVAL": value}))
		assert.ErrorContains(t, err, want, value)
	}
}

// WORKLOAD_HEALTH_PROBE_INTERVAL is ten minutes unless set, within 10s to
// an hour; a bad value names the variable.
func TestWorkloadHealthProbeInterval(t *testing.T) {
	quiet := []string{"--enable-webhooks=false", "--leader-election=false"}
	c, err := outsidePod(t, quiet, env(nil))
	require.NoError(t, err)
	assert.Equal(t, 10*time.Minute, c.WorkloadHealthProbeInterval)
	c, err = outsidePod(t, quiet, env(map[string]string{"WORKLOAD_HEALTH_PROBE_INTERVAL": "10s"}))
	require.NoError(t, err)
	assert.Equal(t, 10*time.Second, c.WorkloadHealthProbeInterval)
	c, err = outsidePod(t, append(quiet, "--workload-health-probe-interval=1h"), env(map[string]string{"WORKLOAD_HEALTH_PROBE_INTERVAL": "1m"}))
	require.NoError(t, err)
	assert.Equal(t, time.Hour, c.WorkloadHealthProbeInterval, "the flag wins")
	for value, want := range map[string]string{
		"often": `WORKLOAD_HEALTH_PROBE_INTERVAL="often": use a duration such as 1h or 30m`,
		"9s":    "WORKLOAD_HEALTH_PROBE_INTERVAL/--workload-health-probe-interval 9s: use 10s to 1h",
		"-5m":   "WORKLOAD_HEALTH_PROBE_INTERVAL/--workload-health-probe-interval -5m0s: use 10s to 1h",
		"61m":   "WORKLOAD_HEALTH_PROBE_INTERVAL/--workload-health-probe-interval 1h1m0s: use 10s to 1h",
	} {
		_, err := outsidePod(t, quiet, env(map[string]string{"WORKLOAD_HEALTH_PROBE_INTERVAL": value}))
		assert.ErrorContains(t, err, want, value)
	}
}

// PROFILER_ADDRESS is off unless set; a value that is no listen address
// names the variable.
func TestProfilerAddress(t *testing.T) {
	quiet := []string{"--enable-webhooks=false", "--leader-election=false"}
	c, err := outsidePod(t, quiet, env(nil))
	require.NoError(t, err)
	assert.Empty(t, c.ProfilerAddr, "off unless set")
	c, err = outsidePod(t, append(quiet, "--profiler-address=127.0.0.1:6060"), env(nil))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:6060", c.ProfilerAddr)
	_, err = outsidePod(t, quiet, env(map[string]string{"PROFILER_ADDRESS": "localhost"}))
	assert.ErrorContains(t, err, `PROFILER_ADDRESS/--profiler-address "localhost": use host:port such as ":8080", or "0" to disable`)
	e, err := ParseExtension([]string{"--profiler-address=:6060"}, env(map[string]string{"WEBHOOK_CERT_DIR": certDir(t)}), nil)
	require.NoError(t, err)
	assert.Equal(t, ":6060", e.ProfilerAddr, "the extension reads it too")
}

// OTEL_EXPORTER_OTLP_ENDPOINT=none turns tracing off as an empty value does.
func TestOTLPNone(t *testing.T) {
	quiet := []string{"--enable-webhooks=false", "--leader-election=false"}
	c, err := outsidePod(t, quiet, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": OTLPOff}))
	require.NoError(t, err)
	assert.Empty(t, c.OTLPEndpoint)
	assert.Empty(t, c.TracesEndpoint())
}

// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT wins over OTEL_EXPORTER_OTLP_ENDPOINT,
// as the OpenTelemetry specification orders them, also over none; none
// unsets it.
func TestOTLPTracesEndpoint(t *testing.T) {
	quiet := []string{"--enable-webhooks=false", "--leader-election=false"}
	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"traces endpoint wins": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b:4317"},
			want: "https://b:4317",
		},
		"over none":      {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": OTLPOff, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4317"}, want: "http://b:4317"},
		"none unsets it": {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": OTLPOff}, want: "http://a:4317"},
		"endpoint alone": {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317"}, want: "http://a:4317"},
	} {
		c, err := outsidePod(t, quiet, env(tc.env))
		require.NoError(t, err, name)
		assert.Equal(t, tc.want, c.TracesEndpoint(), name)
	}
	_, err := outsidePod(t, quiet, env(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4317"}))
	assert.ErrorContains(t, err, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT/--otel-exporter-otlp-traces-endpoint \"collector:4317\": use an http:// or https:// URL")
}

// A shard reads its watch filter and namespaces, and leads with a lease of
// its own: two controllers of one shard share it, two shards do not, and an
// unsharded controller keeps the name it always had.
func TestShardLeaderElectionID(t *testing.T) {
	shard := func(e map[string]string) Controller {
		t.Helper()
		c, err := outsidePod(t, []string{"--leader-election=false", "--enable-webhooks=false"}, env(e))
		require.NoError(t, err)
		return c
	}
	a := shard(map[string]string{"WATCH_FILTER": "a", "WATCH_NAMESPACES": "tenants-1, tenants-2"})
	assert.Equal(t, "a", a.WatchFilter)
	assert.Equal(t, []string{"tenants-1", "tenants-2"}, a.Namespaces)
	assert.Equal(t, a.LeaderElectionID(), shard(map[string]string{"WATCH_FILTER": "a", "WATCH_NAMESPACES": "tenants-2,tenants-1"}).LeaderElectionID())
	assert.NotEqual(t, a.LeaderElectionID(), shard(map[string]string{"WATCH_FILTER": "b", "WATCH_NAMESPACES": "tenants-1,tenants-2"}).LeaderElectionID())
	assert.Equal(t, "hosted-control-plane-controller.controlplane.cluster.x-k8s.io", shard(nil).LeaderElectionID())
	assert.Regexp(t, `^hosted-control-plane-controller-[0-9a-f]{10}\.controlplane\.cluster\.x-k8s\.io$`, a.LeaderElectionID())
}
