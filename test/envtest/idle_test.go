package envtest

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// How many control planes the idle benchmark runs, how long it lets them
// settle once their workload side is synced, and how long it counts.
const (
	idleControlPlanes = 3
	idleSettle        = time.Minute
	idleWindow        = 5 * time.Minute
)

// BenchmarkIdleControlPlanes counts the API requests the controller (the
// shared one, with the default settings) makes for control planes that
// need nothing: each serves a real API server and etcd, is Available and
// has its workload add-ons applied. It reads the controller's own client
// metrics (rest_client_requests_total, whose host label tells the
// management API server from each hosted one) at the start and end of a
// five-minute window and prints the requests per control plane per minute,
// to the management cluster, to the workload clusters and both together,
// and the controller's resident memory per connected control plane.
func BenchmarkIdleControlPlanes(b *testing.B) {
	before, err := controller.RSSMiB()
	require.NoError(b, err)
	management, err := url.Parse(env.Config.Host)
	require.NoError(b, err)
	workloads := map[string]bool{}
	for i := range idleControlPlanes {
		cluster, hcp := servingControlPlane(b, fmt.Sprintf("idle-%d", i))
		setStatus(b, cluster, func(c *clusterv1.Cluster) { c.Status.Initialization.InfrastructureProvisioned = ptr.To(true) })
		workloads[fmt.Sprintf("%s:%d", hcp.Spec.ControlPlaneEndpoint.Host, hcp.Spec.ControlPlaneEndpoint.Port)] = true
		waitCondition(b, hcp, v1alpha1.NodeJoinReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
		waitCondition(b, hcp, v1alpha1.CoreDNSReadyCondition, metav1.ConditionTrue, v1alpha1.NoNodesReason)
		waitCondition(b, hcp, v1alpha1.KonnectivityAgentReadyCondition, metav1.ConditionTrue, v1alpha1.NoNodesReason)
	}
	time.Sleep(idleSettle)
	start, startedAt := requestsByHost(b), time.Now()
	time.Sleep(idleWindow)
	end, minutes := requestsByHost(b), time.Since(startedAt).Minutes()
	after, err := controller.RSSMiB()
	require.NoError(b, err)

	var toManagement, toWorkloads float64
	for series, n := range end {
		n -= start[series]
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
	fmt.Printf("BENCH idle_requests_per_cp_min %.3f req/min\n", perCPMinute(toManagement+toWorkloads))
	fmt.Printf("BENCH idle_management_requests_per_cp_min %.3f req/min\n", perCPMinute(toManagement))
	fmt.Printf("BENCH idle_workload_requests_per_cp_min %.3f req/min\n", perCPMinute(toWorkloads))
	fmt.Printf("BENCH controller_rss_mib_per_connected_cp %.3f MiB\n", (after-before)/idleControlPlanes)
}

// requestSeries is one series of rest_client_requests_total.
type requestSeries struct{ host, method, code string }

// requestsByHost reads the shared controller's rest_client_requests_total.
func requestsByHost(t testing.TB) map[requestSeries]float64 {
	t.Helper()
	counts := map[requestSeries]float64{}
	for _, m := range families(t, scrapeController(t))["rest_client_requests_total"].GetMetric() {
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
		counts[s] += m.GetCounter().GetValue()
	}
	require.NotEmpty(t, counts, "no rest_client_requests_total in the controller's metrics")
	hosts := slices.Sorted(func(yield func(string) bool) {
		for s := range counts {
			if !yield(s.host) {
				return
			}
		}
	})
	t.Logf("hosts: %s", strings.Join(slices.Compact(hosts), ", "))
	return counts
}
