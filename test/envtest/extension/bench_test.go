package extension

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/hooks"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/topology"
)

// The figures are what Cluster API waits for: a hook call over TLS to the
// running extension, end to end. They are printed, never asserted.

// GeneratePatches for the sample template and an infrastructure template,
// with every variable set and the endpoint taken from a real Gateway.
func BenchmarkGeneratePatches(b *testing.B) {
	ns, gwNS := namespace(b), namespace(b)
	createGateway(b, gwNS, "edge")
	req, _ := generatePatchesRequest(b, ns, map[string]any{
		topology.VarControlPlaneReplicas: 3, topology.VarGatewayName: "edge", topology.VarGatewayNamespace: gwNS,
		topology.VarCertSANs: []string{"api.example.com", "192.0.2.10"}, topology.VarEtcdReplicas: 5, topology.VarEtcdVolumeSize: "8Gi",
		topology.VarEtcdBackup: map[string]any{"schedule": "@daily", "secretName": "s3"},
	})
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		resp := &runtimehooksv1.GeneratePatchesResponse{}
		callHook(b, runtimehooksv1.GeneratePatches, topology.GeneratePatchesHandler, req, resp)
		took = append(took, time.Since(start))
		if resp.Status != runtimehooksv1.ResponseStatusSuccess || len(resp.Items) != 2 {
			b.Fatalf("GeneratePatches: %s %s", resp.Status, resp.Message)
		}
	}
	report(b, "generate_patches_p99_ms", took)
}

// BeforeClusterUpgrade for a healthy control plane: the HostedControlPlane,
// the client certificate Secret and the EndpointSlices read from the API
// server, and a real three-member etcd asked for status, members and
// alarms over the extension's cached connections.
func BenchmarkEtcdGate(b *testing.B) {
	ns := namespace(b)
	hcp := createHostedControlPlane(b, ns, "demo")
	setAvailable(b, hcp, metav1.ConditionTrue, "Available", "")
	startEtcd(b, "demo", ns).publish()
	req := &runtimehooksv1.BeforeClusterUpgradeRequest{
		CommonRequest: runtimehooksv1.CommonRequest{Settings: map[string]string{hooks.RetryAfterSetting: "7"}},
		Cluster: clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
			Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: v1alpha1.GroupVersion.Group, Kind: "HostedControlPlane", Name: hcp.Name,
			}},
		},
		FromKubernetesVersion: "v1.35.2", ToKubernetesVersion: "v1.36.3",
	}
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		resp := &runtimehooksv1.BeforeClusterUpgradeResponse{}
		callHook(b, runtimehooksv1.BeforeClusterUpgrade, hooks.BeforeClusterUpgradeHandler, req, resp)
		took = append(took, time.Since(start))
		if resp.Status != runtimehooksv1.ResponseStatusSuccess || resp.RetryAfterSeconds != 0 {
			b.Fatalf("BeforeClusterUpgrade holds a healthy control plane: %s", resp.Message)
		}
	}
	report(b, "etcd_gate_p99_ms", took)
}

// report prints the 99th percentile as `BENCH <name> <value> ms`, the line
// `make bench` shows, and adds it to the benchmark's own output.
func report(b *testing.B, name string, took []time.Duration) {
	b.Helper()
	slices.Sort(took)
	p99 := took[(len(took)*99+99)/100-1]
	ms := float64(p99.Microseconds()) / 1000
	b.ReportMetric(ms, "p99-ms")
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	fmt.Printf("BENCH %s %.2f ms\n", name, ms)
}
