package envtest

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
)

// How many control planes the idle benchmark runs, how long it lets them
// settle once their workload side is synced, and how long it counts unless
// BENCH_IDLE_WINDOW (a Go duration) says otherwise: the watches of the
// controller's workload caches last 30 to 60 minutes, so only a window of an
// hour or more counts their renewals at their steady rate, where five
// minutes counts the rest (the probes, the passes) and few renewals.
const (
	idleControlPlanes = 3
	idleSettle        = time.Minute
	idleWindowDefault = 5 * time.Minute
)

// idleWindow is how long the idle benchmark counts.
func idleWindow(b *testing.B) time.Duration {
	v := os.Getenv("BENCH_IDLE_WINDOW")
	if v == "" {
		return idleWindowDefault
	}
	d, err := time.ParseDuration(v)
	require.NoError(b, err, "BENCH_IDLE_WINDOW is a Go duration such as 65m")
	return d
}

// BenchmarkIdleControlPlanes counts the API requests the controller (the
// shared one, with the default settings) makes for control planes that
// need nothing: each serves a real API server and etcd, is Available and
// has its workload add-ons applied. It reads the controller's own client
// metrics (rest_client_requests_total, whose host label tells the
// management API server from each hosted one) at the start and end of a
// window (idleWindow) and prints the requests per control plane per minute,
// to the management cluster, to the workload clusters and both together,
// and the controller's memory per connected control plane: its resident
// memory grown since the start, over all of them, and its live heap after
// a garbage collection grown from the first control plane connected to
// the last, over the others (what each more costs, without what the first
// costs once).
func BenchmarkIdleControlPlanes(b *testing.B) {
	before, err := controller.RSSMiB()
	require.NoError(b, err)
	var firstHeap float64
	management, err := url.Parse(env.Config.Host)
	require.NoError(b, err)
	workloads := map[string]bool{}
	hcps := make([]*v1alpha1.HostedControlPlane, idleControlPlanes)
	for i := range hcps {
		// An endpoint that is a name, which the workload cluster's
		// kubernetes Service can lead to (through the kas-tunnel
		// DaemonSet), unlike a loopback address: every workload phase is
		// done, so the control plane is passed over every two minutes as
		// an idle one is, not retried with backoff.
		cluster, hcp := servingControlPlane(b, fmt.Sprintf("idle-%d", i), func(h *v1alpha1.HostedControlPlane) {
			h.Spec.ControlPlaneEndpoint.Host = "localhost"
		})
		setStatus(b, cluster, func(c *clusterv1.Cluster) { c.Status.Initialization.InfrastructureProvisioned = ptr.To(true) })
		workloads[fmt.Sprintf("%s:%d", hcp.Spec.ControlPlaneEndpoint.Host, hcp.Spec.ControlPlaneEndpoint.Port)] = true
		w := workloadFor(b, hcp.Namespace, hcp.Name)
		tunnel := client.ObjectKey{Namespace: "kube-system", Name: components.KubernetesTunnelName}
		waitFor(b, "the kas-tunnel DaemonSet in the workload cluster", func() error {
			return w.client.Get(testContext(b), tunnel, &appsv1.DaemonSet{})
		})
		require.NoError(b, RollOutDaemonSet(testContext(b), w.client, tunnel))
		waitCondition(b, hcp, v1alpha1.KubernetesServiceReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
		waitCondition(b, hcp, v1alpha1.NodeJoinReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
		for _, addon := range []string{v1alpha1.CoreDNSReadyCondition, v1alpha1.KubeProxyReadyCondition, v1alpha1.KonnectivityAgentReadyCondition} {
			waitCondition(b, hcp, addon, metav1.ConditionTrue, v1alpha1.NoNodesReason)
		}
		hcps[i] = hcp
		if i == 0 {
			// What the first connection costs once, whatever the number
			// (the types' codecs, the CEL environments), stays out.
			firstHeap = controllerHeap(b, "idle-first")
		}
	}
	window := idleWindow(b)
	time.Sleep(idleSettle)
	start, startedAt := snapshot(b), time.Now()
	time.Sleep(window)
	end, minutes := snapshot(b), time.Since(startedAt).Minutes()
	after, err := controller.RSSMiB()
	require.NoError(b, err)
	heap := controllerHeap(b, "idle-all")
	b.Logf("in %.1f minutes: %v passes over the control planes, %v health probes of the ClusterCache",
		minutes, end.passes-start.passes, end.probes-start.probes)
	for _, hcp := range hcps {
		for _, c := range get(b, &v1alpha1.HostedControlPlane{}, hcp.Namespace, hcp.Name).Status.Conditions {
			if c.Status != metav1.ConditionTrue && c.Type != clusterv1.PausedCondition {
				b.Errorf("%s: %s=%s (%s), not idle: %s", hcp.Name, c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}

	var toManagement, toWorkloads float64
	for series, n := range end.requests {
		n -= start.requests[series]
		switch {
		case n == 0:
			continue
		case series.host == management.Host:
			toManagement += n
		case workloads[series.host]:
			toWorkloads += n
		default:
			b.Errorf("%v requests to %s, neither the management cluster nor a workload cluster", n, series.host)
		}
		b.Logf("%s %s %s: %v", series.host, series.method, series.code, n)
	}
	perCPMinute := func(n float64) float64 { return n / idleControlPlanes / minutes }
	fmt.Printf("BENCH idle_window_min %.1f min\n", minutes)
	fmt.Printf("BENCH idle_requests_per_cp_min %.3f req/min\n", perCPMinute(toManagement+toWorkloads))
	fmt.Printf("BENCH idle_management_requests_per_cp_min %.3f req/min\n", perCPMinute(toManagement))
	fmt.Printf("BENCH idle_workload_requests_per_cp_min %.3f req/min\n", perCPMinute(toWorkloads))
	fmt.Printf("BENCH controller_rss_mib_per_connected_cp %.3f MiB\n", (after-before)/idleControlPlanes)
	b.Logf("the controller's live heap: %.1f MiB with one control plane connected, %.1f MiB with %d", firstHeap, heap, idleControlPlanes)
	fmt.Printf("BENCH controller_heap_mib_per_connected_cp %.3f MiB\n", (heap-firstHeap)/(idleControlPlanes-1))
}

// controllerHeap is the shared controller's live heap in MiB right after
// a garbage collection; it also writes the controller's heap profile to
// $BENCH_PROFILE_DIR/<name>.pprof when that is set, for go tool pprof -base.
func controllerHeap(b *testing.B, name string) float64 {
	heap, err := controller.HeapMiB(testContext(b))
	require.NoError(b, err)
	if dir := os.Getenv("BENCH_PROFILE_DIR"); dir != "" {
		file := filepath.Join(dir, name+".pprof")
		require.NoError(b, controller.SaveHeapProfile(testContext(b), file))
		b.Logf("the controller's heap profile: %s", file)
	}
	return heap
}

// requestSeries is one series of rest_client_requests_total.
type requestSeries struct{ host, method, code string }

// counts are what one scrape of the shared controller's metrics tells: its
// requests (rest_client_requests_total), its passes over control planes and
// its ClusterCache's health probes. A scrape costs the controller the
// authentication and authorization of the scraper (a TokenReview and a
// SubjectAccessReview, unless cached), which the scrape counts itself.
type counts struct {
	requests       map[requestSeries]float64
	passes, probes float64
}

// snapshot scrapes the shared controller's metrics once.
func snapshot(t testing.TB) counts {
	t.Helper()
	f := families(t, scrapeController(t))
	c := counts{requests: map[requestSeries]float64{}}
	for _, m := range f["rest_client_requests_total"].GetMetric() {
		var s requestSeries
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "host":
				s.host = l.GetValue()
			case "method":
				s.method = l.GetValue()
			case "code":
				s.code = l.GetValue()
			}
		}
		c.requests[s] += m.GetCounter().GetValue()
	}
	require.NotEmpty(t, c.requests, "no rest_client_requests_total in the controller's metrics")
	for _, m := range f["controller_runtime_reconcile_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "controller" && l.GetValue() == "hostedcontrolplane" {
				c.passes += m.GetCounter().GetValue()
			}
		}
	}
	for _, m := range f["capi_cluster_cache_healthchecks_total"].GetMetric() {
		c.probes += m.GetCounter().GetValue()
	}
	return c
}
