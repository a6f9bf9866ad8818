package settings

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/logging"
)

// Serving is what both binaries need to find the management cluster, log,
// serve TLS and report health.
type Serving struct {
	// Kubeconfig is the management cluster's kubeconfig file; when empty the
	// binary looks where every controller-runtime manager does: the files in
	// KUBECONFIG, the pod's service account, then ~/.kube/config.
	Kubeconfig string
	// LogFormat is json or text; LogLevel a level name or verbosity.
	LogFormat, LogLevel string
	// MetricsAddr and HealthAddr are host:port listen addresses; "0" turns
	// the endpoint off.
	MetricsAddr, HealthAddr string
	// ProfilerAddr, when set, serves Go's pprof profiles (heap, CPU,
	// goroutines) over plain HTTP on that host:port; empty or "0" is off.
	ProfilerAddr string
	// MetricsSecure serves the metrics over HTTPS to clients the management
	// cluster authenticates (TokenReview) and authorizes (SubjectAccessReview
	// of GET on the non-resource URL /metrics).
	MetricsSecure bool
	// CertDir holds tls.crt and tls.key for the TLS server on Port.
	CertDir string
	Port    int
	// OTLPEndpoint, when set, receives traces over OTLP gRPC;
	// OTLPTracesEndpoint, when set, receives them instead, as the
	// OpenTelemetry specification orders the two.
	OTLPEndpoint       string
	OTLPTracesEndpoint string
}

// TracesEndpoint is where traces go: the traces endpoint when set,
// otherwise the endpoint; empty when tracing is off.
func (s Serving) TracesEndpoint() string { return cmp.Or(s.OTLPTracesEndpoint, s.OTLPEndpoint) }

func (s *Serving) bind(src *source, defaultPort int) {
	// KUBECONFIG is client-go's: a list of files it merges, read by
	// controller-runtime when the flag is unset. Binding it to the flag would
	// change what it means.
	src.Flag(&s.Kubeconfig, "kubeconfig", "kubeconfig file of the management cluster (when unset: the files in env KUBECONFIG, "+
		"the pod's service account, then ~/.kube/config)")
	src.String(&s.LogFormat, "log-format", "LOG_FORMAT", "json", "log format: json or text")
	src.String(&s.LogLevel, "log-level", "LOG_LEVEL", "info", "log level: debug, info, warn, error or a verbosity 0-10")
	src.String(&s.MetricsAddr, "metrics-bind-address", "METRICS_BIND_ADDRESS", ":8443", `metrics listen address, "0" to disable`)
	src.Bool(&s.MetricsSecure, "metrics-secure", "METRICS_SECURE", true,
		"serve metrics over HTTPS to clients allowed to GET the non-resource URL /metrics; false: plain HTTP to anyone")
	src.String(&s.HealthAddr, "health-probe-bind-address", "HEALTH_PROBE_BIND_ADDRESS", ":8081", `health and readiness listen address, "0" to disable`)
	src.String(&s.ProfilerAddr, "profiler-address", "PROFILER_ADDRESS", "",
		`pprof listen address (plain HTTP to anyone who reaches it, such as "127.0.0.1:6060"), off when empty or "0"`)
	src.String(&s.CertDir, "webhook-cert-dir", "WEBHOOK_CERT_DIR", filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"),
		"directory with tls.crt and tls.key of the TLS server")
	src.Int(&s.Port, "webhook-port", "WEBHOOK_PORT", defaultPort, "port of the TLS server")
	src.String(&s.OTLPEndpoint, "otel-exporter-otlp-endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT", "", "OTLP gRPC endpoint URL that receives traces, off when empty or none")
	src.String(&s.OTLPTracesEndpoint, "otel-exporter-otlp-traces-endpoint", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "",
		"OTLP gRPC endpoint URL that receives traces in place of --otel-exporter-otlp-endpoint's, unset when empty or none")
}

func (s *Serving) validate(needCerts bool) error {
	var errs []error
	if s.Kubeconfig != "" {
		if _, err := os.Stat(s.Kubeconfig); err != nil {
			errs = append(errs, fmt.Errorf("--kubeconfig %q: %w: give the management cluster's kubeconfig file", s.Kubeconfig, errors.Unwrap(err)))
		}
	}
	if !slices.Contains(logging.Formats, s.LogFormat) {
		errs = append(errs, fmt.Errorf("LOG_FORMAT/--log-format %q: use json or text", s.LogFormat))
	}
	if _, err := logging.ParseLevel(s.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("LOG_LEVEL/--log-level: %w", err))
	}
	errs = append(errs, validateAddr("METRICS_BIND_ADDRESS/--metrics-bind-address", s.MetricsAddr))
	errs = append(errs, validateAddr("HEALTH_PROBE_BIND_ADDRESS/--health-probe-bind-address", s.HealthAddr))
	if s.ProfilerAddr != "" {
		errs = append(errs, validateAddr("PROFILER_ADDRESS/--profiler-address", s.ProfilerAddr))
	}
	if s.Port < 1 || s.Port > 65535 {
		errs = append(errs, fmt.Errorf("WEBHOOK_PORT/--webhook-port %d: use a port from 1 to 65535", s.Port))
	}
	if needCerts {
		for _, f := range []string{"tls.crt", "tls.key"} {
			if _, err := os.Stat(filepath.Join(s.CertDir, f)); err != nil {
				errs = append(errs, fmt.Errorf("WEBHOOK_CERT_DIR/--webhook-cert-dir %q has no %s: mount the serving certificate there", s.CertDir, f))
			}
		}
	}
	errs = append(errs, validateOTLP("OTEL_EXPORTER_OTLP_ENDPOINT/--otel-exporter-otlp-endpoint", &s.OTLPEndpoint))
	errs = append(errs, validateOTLP("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT/--otel-exporter-otlp-traces-endpoint", &s.OTLPTracesEndpoint))
	return errors.Join(errs...)
}

// validateOTLP empties an endpoint set to none and checks any other.
func validateOTLP(name string, endpoint *string) error {
	if *endpoint == OTLPOff {
		*endpoint = ""
	}
	if *endpoint == "" {
		return nil
	}
	if u, err := url.Parse(*endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q: use an http:// or https:// URL such as http://otel-collector:4317", name, *endpoint)
	}
	return nil
}

func validateAddr(name, addr string) error {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr == nil && n >= 0 && n <= 65535 {
			return nil
		}
	}
	return fmt.Errorf(`%s %q: use host:port such as ":8080", or "0" to disable`, name, addr)
}

// Controller configures cmd/controller.
type Controller struct {
	Serving
	Backups
	// LeaderElection keeps one active replica.
	LeaderElection bool
	// Namespace is where the controller runs and keeps its leader lease:
	// CONTROLLER_NAMESPACE, or the pod's own namespace.
	Namespace string
	// MaxConcurrentReconciles bounds parallel reconciles per kind.
	MaxConcurrentReconciles int
	// MaxConcurrentBackups bounds the etcd snapshots taken at once.
	MaxConcurrentBackups int
	// EnableWebhooks serves the admission webhooks.
	EnableWebhooks bool
	// WatchFilter, when set, limits the controller to the control planes
	// and Clusters labelled cluster.x-k8s.io/watch-filter with it (Cluster
	// API's convention); Namespaces, when set, to those namespaces. Either
	// shards a fleet between controllers.
	WatchFilter string
	Namespaces  []string
	// TunnelImage is the image of cmd/tunnel that gateway mode runs beside
	// the API servers and on the workload cluster's nodes, and whose other
	// commands serve the API servers the management cluster's keys and
	// forward their audit events to several webhook targets.
	TunnelImage string
	// EtcdRestoreImage is the image of cmd/etcd-restore, the init container
	// of the etcd members of a control plane with spec.etcd.restore.
	EtcdRestoreImage string
	// AllowedImageRegistries are the registries a control plane's image
	// overrides may pull from; none means any.
	AllowedImageRegistries contract.Registries
	// MustRollInterval is the least time between the starts of two control
	// planes' rollouts of a change a release must roll (see
	// internal/rollout): one control plane rolls at a time.
	MustRollInterval time.Duration
	// WorkloadHealthProbeInterval is how often Cluster API's ClusterCache
	// probes a workload cluster it is connected to while its probes succeed;
	// a failing probe is retried at Cluster API's own pace.
	WorkloadHealthProbeInterval time.Duration
}

// DefaultMustRollInterval starts a control plane's rollout of a change a
// release must roll every ten minutes at most: a fleet of a hundred takes
// a day, and a rollout that breaks one stops there.
const DefaultMustRollInterval = 10 * time.Minute

// maxMustRollInterval is a week, the most a platform would wait between two
// control planes for a change that must roll.
const maxMustRollInterval = 7 * 24 * time.Hour

// DefaultWorkloadHealthProbeInterval probes a healthy workload connection
// every ten minutes instead of Cluster API's ten seconds: the controller's
// own probe of each API server (every two minutes) already notices one
// that stops answering, a pass whose request fails asks for a probe at
// once, and the caches' watches retry on their own.
const DefaultWorkloadHealthProbeInterval = 10 * time.Minute

// The bounds of WORKLOAD_HEALTH_PROBE_INTERVAL: Cluster API's own interval,
// and an hour, beyond which a dead connection would stay unnoticed too long.
const (
	minWorkloadHealthProbeInterval = 10 * time.Second
	maxWorkloadHealthProbeInterval = time.Hour
)

// OTLPOff turns tracing off as an empty OTEL_EXPORTER_OTLP_ENDPOINT does
// (and unsets OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), for installers such as
// clusterctl that take no empty value.
const OTLPOff = "none"

// DefaultMaxConcurrentReconciles is how many control planes are reconciled
// in parallel unless MAX_CONCURRENT_RECONCILES says otherwise.
const DefaultMaxConcurrentReconciles = 10

// DefaultMaxConcurrentBackups is how many etcd snapshots are taken at once
// unless MAX_CONCURRENT_BACKUPS says otherwise.
const DefaultMaxConcurrentBackups = 2

// serviceAccountNamespaceFile is where Kubernetes tells a pod its namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ParseController reads the controller's settings from args and getenv; in a
// pod the namespace defaults to the pod's. It returns flag.ErrHelp after
// printing usage to w when asked for help.
func ParseController(args []string, getenv func(string) string, w io.Writer) (Controller, error) {
	return parseController(args, getenv, w, serviceAccountNamespaceFile)
}

func parseController(args []string, getenv func(string) string, w io.Writer, namespaceFile string) (Controller, error) {
	var c Controller
	src := newSource("controller", getenv)
	c.Serving.bind(src, 9443)
	c.Backups.bind(src)
	src.Bool(&c.LeaderElection, "leader-election", "LEADER_ELECTION", true, "elect one active replica")
	src.String(&c.Namespace, "controller-namespace", "CONTROLLER_NAMESPACE", "", "namespace of the controller and its leader lease (detected in a pod)")
	src.Int(&c.MaxConcurrentReconciles, "max-concurrent-reconciles", "MAX_CONCURRENT_RECONCILES", DefaultMaxConcurrentReconciles,
		"control planes reconciled in parallel")
	src.Int(&c.MaxConcurrentBackups, "max-concurrent-backups", "MAX_CONCURRENT_BACKUPS", DefaultMaxConcurrentBackups,
		"etcd snapshots taken and uploaded at once, across all control planes")
	src.Bool(&c.EnableWebhooks, "enable-webhooks", "ENABLE_WEBHOOKS", true, "serve the admission webhooks")
	src.String(&c.TunnelImage, "tunnel-image", "TUNNEL_IMAGE", contract.DefaultTunnelImage,
		"image of the tunnel that carries a workload cluster's kubernetes Service through the Gateway")
	src.String(&c.EtcdRestoreImage, "etcd-restore-image", "ETCD_RESTORE_IMAGE", contract.DefaultEtcdRestoreImage,
		"image of the init container that restores an etcd member from a snapshot (spec.etcd.restore)")
	src.Duration(&c.MustRollInterval, "must-roll-interval", "MUST_ROLL_INTERVAL", DefaultMustRollInterval,
		"least time between the starts of two control planes' rollouts of a change a release must roll, one at a time (0 to 168h)")
	src.Duration(&c.WorkloadHealthProbeInterval, "workload-health-probe-interval", "WORKLOAD_HEALTH_PROBE_INTERVAL", DefaultWorkloadHealthProbeInterval,
		"how often a connection to a workload cluster whose last health probe succeeded is probed again (10s to 1h); a failing one is probed every 10s")
	src.String(&c.WatchFilter, "watch-filter", "WATCH_FILTER", "",
		"serve only the control planes and Clusters labelled cluster.x-k8s.io/watch-filter=<value> (Cluster API's convention); all when empty")
	var namespaces string
	src.String(&namespaces, "namespaces", "WATCH_NAMESPACES", "", "comma-separated namespaces whose control planes to serve; all when empty")
	var registries string
	src.String(&registries, "allowed-image-registries", "ALLOWED_IMAGE_REGISTRIES", "",
		"comma-separated registries (host[:port][/path]) that image overrides of control planes may pull from; any when empty")
	err := parse(src, args, w)
	if errors.Is(err, flag.ErrHelp) {
		return c, err
	}
	if c.Namespace == "" {
		c.Namespace = podNamespace(namespaceFile)
	}
	errs := []error{err, c.Serving.validate(c.EnableWebhooks), c.Backups.validate()}
	for _, img := range []struct{ setting, value, example string }{
		{"TUNNEL_IMAGE/--tunnel-image", c.TunnelImage, contract.DefaultTunnelImage},
		{"ETCD_RESTORE_IMAGE/--etcd-restore-image", c.EtcdRestoreImage, contract.DefaultEtcdRestoreImage},
	} {
		if _, err := reference.ParseNormalizedNamed(img.value); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w: use an image reference such as %s", img.setting, img.value, err, img.example))
		}
	}
	if c.WatchFilter != "" {
		if msgs := validation.IsValidLabelValue(c.WatchFilter); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("WATCH_FILTER/--watch-filter %q: %s", c.WatchFilter, strings.Join(msgs, "; ")))
		}
	}
	for ns := range strings.SplitSeq(namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns == "" {
			continue
		}
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("WATCH_NAMESPACES/--namespaces %q: %s", ns, strings.Join(msgs, "; ")))
		}
		c.Namespaces = append(c.Namespaces, ns)
	}
	var regErr error
	if c.AllowedImageRegistries, regErr = contract.ParseRegistries(registries); regErr != nil {
		errs = append(errs, fmt.Errorf("ALLOWED_IMAGE_REGISTRIES/--allowed-image-registries: %w", regErr))
	}
	if c.MaxConcurrentReconciles < 1 || c.MaxConcurrentReconciles > 100 {
		errs = append(errs, fmt.Errorf("MAX_CONCURRENT_RECONCILES/--max-concurrent-reconciles %d: use 1 to 100", c.MaxConcurrentReconciles))
	}
	if c.MustRollInterval < 0 || c.MustRollInterval > maxMustRollInterval {
		errs = append(errs, fmt.Errorf("MUST_ROLL_INTERVAL/--must-roll-interval %s: use 0 to 168h", c.MustRollInterval))
	}
	if c.WorkloadHealthProbeInterval < minWorkloadHealthProbeInterval || c.WorkloadHealthProbeInterval > maxWorkloadHealthProbeInterval {
		errs = append(errs, fmt.Errorf("WORKLOAD_HEALTH_PROBE_INTERVAL/--workload-health-probe-interval %s: use 10s to 1h", c.WorkloadHealthProbeInterval))
	}
	if c.MaxConcurrentBackups < 1 || c.MaxConcurrentBackups > 20 {
		errs = append(errs, fmt.Errorf("MAX_CONCURRENT_BACKUPS/--max-concurrent-backups %d: use 1 to 20", c.MaxConcurrentBackups))
	}
	// Said here rather than by the manager, which would fail only after
	// connecting, with a message that names none of our settings.
	if c.LeaderElection && c.Namespace == "" {
		errs = append(errs, errors.New("leader election needs a namespace for its lease, and outside a pod none is detected: "+
			"set CONTROLLER_NAMESPACE/--controller-namespace, or LEADER_ELECTION=false/--leader-election=false to run a single replica without a lease"))
	}
	return c, errors.Join(errs...)
}

// podNamespace is the namespace of the pod this process runs in, or "" when
// it runs outside one.
func podNamespace(file string) string {
	data, err := os.ReadFile(file) //nolint:gosec // a fixed path, or a test's
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// Extension configures cmd/extension.
type Extension struct {
	Serving
	Backups
}

// ParseExtension reads the extension's settings from args and getenv.
func ParseExtension(args []string, getenv func(string) string, w io.Writer) (Extension, error) {
	var e Extension
	src := newSource("extension", getenv)
	e.Serving.bind(src, 9443)
	e.Backups.bind(src)
	err := parse(src, args, w)
	if errors.Is(err, flag.ErrHelp) {
		return e, err
	}
	return e, errors.Join(err, e.Serving.validate(true), e.Backups.validate())
}

func parse(src *source, args []string, w io.Writer) error {
	err := src.parse(args)
	if errors.Is(err, flag.ErrHelp) {
		_, _ = fmt.Fprintf(w, "Usage of %s (each flag may also be set by its environment variable):\n", src.fs.Name())
		src.usage(w)
	}
	return err
}

// Backups is what the platform team allows tenants' etcd backups. The
// controller enforces it and its admission webhooks refuse what breaks it;
// the extension reads the same setting, so that ValidateTopology refuses a
// Cluster whose control plane admission would refuse.
type Backups struct {
	// MinBackupInterval is the least time between two snapshots of one
	// control plane: the shortest gap a schedule may have, and how soon
	// after the last snapshot one asked for with backup-now is taken.
	MinBackupInterval time.Duration
}

// DefaultMinBackupInterval allows hourly snapshots, the most frequent that
// platform teams commonly run for etcd, while bounding what one control
// plane can take of the shared snapshot slots and of its store.
const DefaultMinBackupInterval = time.Hour

// The bounds of MIN_BACKUP_INTERVAL: cron's resolution is a minute, and a
// minimum above a day would refuse daily schedules, the most common.
const (
	minMinBackupInterval = time.Minute
	maxMinBackupInterval = 24 * time.Hour
)

func (b *Backups) bind(src *source) {
	src.Duration(&b.MinBackupInterval, "min-backup-interval", "MIN_BACKUP_INTERVAL", DefaultMinBackupInterval,
		"least time between two etcd snapshots of one control plane, scheduled or asked for (1m to 24h)")
}

func (b *Backups) validate() error {
	if b.MinBackupInterval < minMinBackupInterval || b.MinBackupInterval > maxMinBackupInterval {
		return fmt.Errorf("MIN_BACKUP_INTERVAL/--min-backup-interval %s: use 1m to 24h", b.MinBackupInterval)
	}
	return nil
}

// LeaderElectionID is the name of the controller's leader lease: one per
// shard (WatchFilter and Namespaces), so that the controllers of a sharded
// fleet each lead their own, and the unsharded name otherwise.
func (c Controller) LeaderElectionID() string {
	const id = "hosted-control-plane-controller"
	if c.WatchFilter == "" && len(c.Namespaces) == 0 {
		return id + ".controlplane.cluster.x-k8s.io"
	}
	namespaces := slices.Sorted(slices.Values(c.Namespaces))
	sum := sha256.Sum256([]byte(c.WatchFilter + "/" + strings.Join(namespaces, ",")))
	return fmt.Sprintf("%s-%x.controlplane.cluster.x-k8s.io", id, sum[:5])
}
