package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// outageControlPlanes is how many control planes stop answering at once
// in the outage benchmark; BENCH_OUTAGE_CONTROL_PLANES sets another number.
const outageControlPlanes = 300

// BenchmarkReconcileUnderOutage runs the controller binary (ten workers, a
// probe timeout of five seconds) over control planes whose API servers all
// hang, as behind a Gateway whose data plane is down: their endpoint is a
// listener that accepts connections and never answers, which a thousand
// real control planes could not simulate on one machine (their pods are
// not run either: envtest has no kubelet). Each is marked initialized, so
// that every pass probes it, as it probes an Available control plane that
// stops answering. Then the spec of one more control plane, whose endpoint
// refuses at once, is changed twenty times, and the time until a pass has
// seen each change (status.observedGeneration) is measured:
// BENCH reconcile_latency_under_outage_p99_s. While a pass waited for the
// probe, N hanging control planes, requeued every 15 s, took N×5 s of the
// ten workers' 150 s per 15 s, so past about 30 of them a change waited
// behind them, the longer the more there were; probes outside the workers
// leave the workers free whatever N is.
func BenchmarkReconcileUnderOutage(b *testing.B) {
	ctx := context.Background()
	n := outageControlPlanes
	if v := os.Getenv("BENCH_OUTAGE_CONTROL_PLANES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("BENCH_OUTAGE_CONTROL_PLANES: %v", err)
		}
	}
	hang := hangingListener(b)
	proc, err := env.StartController(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = proc.Stop(30 * time.Second) }()

	ns := namespace(ctx, b)
	_, port, _ := net.SplitHostPort(hang.Addr().String())
	p, _ := strconv.Atoi(port)
	for i := range n {
		hcp, err := createControlPlane(ctx, env.Client, ns, fmt.Sprintf("hangs-%04d", i), func(h *v1alpha1.HostedControlPlane) {
			h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(p)}
		})
		if err != nil {
			b.Fatal(err)
		}
		initialized := client.RawPatch(types.MergePatchType, []byte(`{"status":{"initialization":{"controlPlaneInitialized":true}}}`))
		if err := env.Client.Status().Patch(ctx, hcp, initialized); err != nil {
			b.Fatal(err)
		}
	}
	measured, err := createControlPlane(ctx, env.Client, ns, "measured")
	if err != nil {
		b.Fatal(err)
	}
	// Measured once the fleet is settled (every certificate issued, so no
	// pass comes for a new object), the passes over the hanging control
	// planes then coming every 15 s.
	settle(ctx, b, ns, n+1)
	time.Sleep(30 * time.Second)

	var latencies []float64
	for i := range 20 {
		after := metav1.NewTime(time.Now().Add(time.Hour + time.Duration(i)*time.Second))
		data, err := json.Marshal(map[string]any{"spec": map[string]any{"rollout": map[string]any{"after": after}}})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := env.Client.Patch(ctx, measured, client.RawPatch(types.MergePatchType, data)); err != nil {
			b.Fatal(err)
		}
		for measured.Status.ObservedGeneration < measured.Generation {
			if time.Since(start) > 5*time.Minute {
				b.Fatalf("change %d not reconciled after 5 minutes", i)
			}
			time.Sleep(50 * time.Millisecond)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(measured), measured); err != nil {
				b.Fatal(err)
			}
		}
		latencies = append(latencies, time.Since(start).Seconds())
		time.Sleep(time.Second)
	}
	slices.Sort(latencies)
	report("reconcile_latency_under_outage_p50_s", latencies[len(latencies)/2], "s")
	report("reconcile_latency_under_outage_p99_s", latencies[len(latencies)-1], "s")
	report("outage_control_planes", float64(n), "count")
}

// hangingListener accepts connections and never answers on them.
func hangingListener(b *testing.B) net.Listener {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range held {
					_ = c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// settle waits until the n control planes of ns have all their
// certificates issued.
func settle(ctx context.Context, b *testing.B, ns string, n int) {
	b.Helper()
	for deadline := time.Now().Add(20 * time.Minute); ; time.Sleep(2 * time.Second) {
		list := &v1alpha1.HostedControlPlaneList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		issued := 0
		for i := range list.Items {
			if conditions.IsTrue(&list.Items[i], v1alpha1.CertificatesReadyCondition) {
				issued++
			}
		}
		if issued == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d control planes with every certificate issued after 20 minutes", issued, n)
		}
	}
}
