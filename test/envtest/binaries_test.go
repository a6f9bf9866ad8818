package envtest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/settings"
)

// leaseOf is the leader lease of a controller that serves namespace ns
// alone, in ns.
func leaseOf(ns string) client.ObjectKey {
	return client.ObjectKey{Namespace: ns, Name: settings.Controller{Namespaces: []string{ns}}.LeaderElectionID()}
}

// A second controller takes the leader lease, serves health and metrics, and
// on SIGTERM releases the lease and exits 0. It serves its own namespace
// alone, so that the other tests' control planes stay the shared
// controller's.
func TestControllerStartsAndStops(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	p := []int{freePort(t), freePort(t), freePort(t)}
	bin, err := Build(env.Root, "./cmd/controller", t.TempDir())
	require.NoError(t, err)
	proc, err := StartProcess(bin, []string{
		"KUBECONFIG=" + env.Kubeconfig, "CONTROLLER_NAMESPACE=" + ns, "WATCH_NAMESPACES=" + ns, "LEADER_ELECTION=true",
		"ENABLE_WEBHOOKS=false", "LOG_FORMAT=json", "LOG_LEVEL=debug",
		fmt.Sprintf("HEALTH_PROBE_BIND_ADDRESS=127.0.0.1:%d", p[0]), fmt.Sprintf("PROFILER_ADDRESS=127.0.0.1:%d", p[2]),
		"GOMEMLIMIT=300MiB",
	}, fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", p[1]))
	require.NoError(t, err)
	t.Cleanup(func() { _ = proc.Stop(5 * time.Second) })
	require.NoError(t, proc.WaitReady(fmt.Sprintf("http://127.0.0.1:%d/healthz", p[0]), time.Minute))
	require.NoError(t, proc.WaitListening(fmt.Sprintf("127.0.0.1:%d", p[1]), time.Minute))
	code, _, err := Scrape(testContext(t), fmt.Sprintf("https://127.0.0.1:%d/metrics", p[1]), metricsToken(t))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "metrics served to the metrics reader")
	code, heap, err := Scrape(testContext(t), fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?debug=1", p[2]), "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code, "PROFILER_ADDRESS serves pprof's heap profile")
	assert.Contains(t, heap, "heap profile:", "the heap profile, in pprof's text form")

	lease := &coordinationv1.Lease{}
	require.Eventually(t, func() bool {
		err := env.Client.Get(testContext(t), leaseOf(ns), lease)
		return err == nil && ptr.Deref(lease.Spec.HolderIdentity, "") != ""
	}, time.Minute, 200*time.Millisecond, "the controller takes the leader lease in CONTROLLER_NAMESPACE")

	require.NoError(t, proc.Stop(30*time.Second), "exit status 0 after SIGTERM")
	require.NoError(t, env.Client.Get(testContext(t), leaseOf(ns), lease))
	assert.Empty(t, ptr.Deref(lease.Spec.HolderIdentity, ""), "the lease is released for the next replica")
	assert.Contains(t, proc.Output(), `"msg":"controller stopped"`, "logs are JSON as LOG_FORMAT says")
	assert.Contains(t, proc.Output(), `"msg":"memory limit","GOMEMLIMIT":314572800`, "GOMEMLIMIT given is kept, not the container's")
}

// Bad configuration ends the process at once with status 2 and a message
// naming each bad setting.
func TestBinariesRejectBadConfiguration(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		pkg  string
		env  []string
		args []string
		want []string
	}{
		{
			pkg:  "./cmd/controller",
			env:  []string{"LOG_FORMAT=xml", "MAX_CONCURRENT_RECONCILES=0", "ENABLE_WEBHOOKS=false", "LEADER_ELECTION=false"},
			want: []string{`LOG_FORMAT/--log-format "xml": use json or text`, "MAX_CONCURRENT_RECONCILES/--max-concurrent-reconciles 0: use 1 to 100"},
		},
		{
			pkg:  "./cmd/controller",
			env:  []string{"LEADER_ELECTION=sometimes", "WEBHOOK_CERT_DIR=" + dir},
			want: []string{`LEADER_ELECTION="sometimes": use true or false`, "has no tls.crt: mount the serving certificate there"},
		},
		{
			// Outside a pod, with leader election on (the default) and no
			// namespace for its lease.
			pkg: "./cmd/controller",
			env: []string{"ENABLE_WEBHOOKS=false", "LOG_LEVEL=INFO"},
			want: []string{"leader election needs a namespace for its lease, and outside a pod none is detected: " +
				"set CONTROLLER_NAMESPACE/--controller-namespace, or LEADER_ELECTION=false/--leader-election=false"},
		},
		{
			pkg:  "./cmd/extension",
			env:  []string{"WEBHOOK_CERT_DIR=" + dir, "LOG_LEVEL=chatty"},
			want: []string{"has no tls.key", `log level "chatty"`},
		},
		{
			pkg:  "./cmd/extension",
			env:  []string{"WEBHOOK_CERT_DIR=" + env.WebhookCertDir()},
			args: []string{"--kubeconfig", dir + "/absent"},
			want: []string{`--kubeconfig "` + dir + `/absent": no such file or directory: give the management cluster's kubeconfig file`},
		},
	} {
		bin, err := Build(env.Root, tc.pkg, dir)
		require.NoError(t, err)
		cmd := exec.Command(bin, tc.args...)
		cmd.Env = append([]string{"KUBECONFIG=" + env.Kubeconfig}, tc.env...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%s must fail: %v\n%s", tc.pkg, err, out)
		assert.Equal(t, 2, exit.ExitCode(), "%s", out)
		for _, want := range tc.want {
			assert.Contains(t, string(out), want)
		}
		t.Logf("%s %v: exit status %d\n%s", tc.pkg, tc.args, exit.ExitCode(), out)
	}
}

// Like every controller-runtime manager, both binaries take --kubeconfig.
// With no KUBECONFIG, no service account and no ~/.kube/config, the
// controller fails to find an API server, and given only --kubeconfig it
// takes its leader lease there (serving that namespace alone, as in
// TestControllerStartsAndStops).
func TestBinariesTakeKubeconfigFlag(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	nowhere := []string{"KUBECONFIG=", "HOME=" + dir, "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT="}
	bin, err := Build(env.Root, "./cmd/controller", dir)
	require.NoError(t, err)
	quiet := []string{"ENABLE_WEBHOOKS=false", "METRICS_BIND_ADDRESS=0"}

	cmd := exec.Command(bin, "--leader-election=false", "--health-probe-bind-address=0")
	cmd.Env = append(append(os.Environ(), nowhere...), quiet...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "without a kubeconfig the controller must fail: %v\n%s", err, out)
	assert.Equal(t, 1, exit.ExitCode(), "%s", out)
	assert.Contains(t, string(out), "kubeconfig: ")
	t.Logf("without --kubeconfig: exit status %d\n%s", exit.ExitCode(), out)

	ns := namespace(t)
	health := freePort(t)
	proc, err := StartProcess(bin, append(append(nowhere, quiet...), fmt.Sprintf("HEALTH_PROBE_BIND_ADDRESS=127.0.0.1:%d", health)),
		"--kubeconfig", env.Kubeconfig, "--controller-namespace", ns, "--namespaces", ns)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proc.Stop(5 * time.Second) })
	require.NoError(t, proc.WaitReady(fmt.Sprintf("http://127.0.0.1:%d/healthz", health), time.Minute))
	lease := &coordinationv1.Lease{}
	require.Eventually(t, func() bool {
		err := env.Client.Get(testContext(t), leaseOf(ns), lease)
		return err == nil && ptr.Deref(lease.Spec.HolderIdentity, "") != ""
	}, time.Minute, 200*time.Millisecond, "the controller reaches the API server of --kubeconfig and takes its lease; output:\n%s", proc.Output())
	require.NoError(t, proc.Stop(30*time.Second), "exit status 0 after SIGTERM")

	ext, err := Build(env.Root, "./cmd/extension", dir)
	require.NoError(t, err)
	p := []int{freePort(t), freePort(t)}
	proc, err = StartProcess(ext, append(nowhere, "WEBHOOK_CERT_DIR="+env.WebhookCertDir(), "METRICS_BIND_ADDRESS=0",
		fmt.Sprintf("WEBHOOK_PORT=%d", p[0]), fmt.Sprintf("HEALTH_PROBE_BIND_ADDRESS=127.0.0.1:%d", p[1])),
		"--kubeconfig="+env.Kubeconfig)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proc.Stop(5 * time.Second) })
	require.NoError(t, proc.WaitReady(fmt.Sprintf("http://127.0.0.1:%d/readyz", p[1]), time.Minute), "the extension starts with --kubeconfig alone")
	require.NoError(t, proc.Stop(30*time.Second), "exit status 0 after SIGTERM")
}

// The extension serves Runtime SDK discovery over TLS and stops cleanly.
func TestExtensionServesDiscovery(t *testing.T) {
	parallel(t)
	p := []int{freePort(t), freePort(t)}
	bin, err := Build(env.Root, "./cmd/extension", t.TempDir())
	require.NoError(t, err)
	proc, err := StartProcess(bin, []string{
		"KUBECONFIG=" + env.Kubeconfig, "WEBHOOK_CERT_DIR=" + env.WebhookCertDir(), "LOG_FORMAT=text",
		fmt.Sprintf("WEBHOOK_PORT=%d", p[0]), fmt.Sprintf("HEALTH_PROBE_BIND_ADDRESS=127.0.0.1:%d", p[1]), "METRICS_BIND_ADDRESS=0",
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = proc.Stop(5 * time.Second) })
	require.NoError(t, proc.WaitReady(fmt.Sprintf("http://127.0.0.1:%d/readyz", p[1]), time.Minute))

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(env.WebhookCA()))
	https := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req := `{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"DiscoveryRequest"}`
	resp, err := https.Post(fmt.Sprintf("https://127.0.0.1:%d/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery", p[0]),
		"application/json", bytes.NewBufferString(req))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var discovery struct{ Status string }
	require.NoError(t, json.Unmarshal(body, &discovery))
	assert.Equal(t, "Success", discovery.Status, "%s", body)

	require.NoError(t, proc.Stop(30*time.Second), "exit status 0 after SIGTERM")
	assert.True(t, strings.Contains(proc.Output(), "extension stopped"))
}
