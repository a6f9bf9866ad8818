package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// outageControlPlanes is how many control planes stop answering at once
// in the outage benchmark; BENCH_OUTAGE_CONTROL_PLANES sets another number.
const outageControlPlanes = 300

// BenchmarkReconcileUnderOutage runs the controller binary (ten workers, a
// probe timeout of five seconds, etcd calls of two) over control planes
// whose API servers and etcd members all hang, as behind a Gateway whose
// data plane is down or past a network partition: their API server
// endpoint is a listener that accepts connections and never answers, and
// so is the address of their etcd member, a pod the benchmark creates
// with that address (a thousand real control planes could not run on one
// machine, and envtest has no kubelet: these pods and endpoints are
// simulated). Each is marked initialized, so that every pass probes it, as
// it probes an Available control plane that stops answering. Then the spec
// of one more control plane, whose endpoint refuses at once, is changed
// twenty times, and the time until a pass has seen each change
// (status.observedGeneration) is measured:
// BENCH reconcile_latency_under_outage_p99_s. While a pass waited for the
// probe and etcd, N hanging control planes, requeued every 15 s, took
// N×7 s of the ten workers' 150 s per 15 s, so past about 20 of them a
// change waited behind them, the longer the more there were; asks outside
// the workers leave the workers free whatever N is. Their passes still
// cost CPU, and on two cores 300 of them every 15 s kept the queue full,
// so a change waited its turn behind them (p99 32 s); queued at the low
// priority, they now yield to it.
func BenchmarkReconcileUnderOutage(b *testing.B) {
	ctx := context.Background()
	n := outageControlPlanes
	if v := os.Getenv("BENCH_OUTAGE_CONTROL_PLANES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("BENCH_OUTAGE_CONTROL_PLANES: %v", err)
		}
	}
	hang := hangingListener(b, "127.0.0.1:0")
	// An address of loopback of its own, on etcd's client port.
	etcdIP := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(254), 1+rand.IntN(254), 1+rand.IntN(254)) //nolint:gosec // not a secret
	hangingListener(b, net.JoinHostPort(etcdIP, strconv.Itoa(contract.EtcdClientPort)))
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
	for i := range n {
		hangingMember(ctx, b, ns, fmt.Sprintf("hangs-%04d", i), etcdIP)
	}
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

// hangingMember runs the first etcd member of a control plane, as its
// StatefulSet would, at ip, once the controller has made the StatefulSet.
func hangingMember(ctx context.Context, b *testing.B, ns, name, ip string) {
	b.Helper()
	sts := &appsv1.StatefulSet{}
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(time.Second) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: contract.EtcdName(name)}, sts)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("no etcd StatefulSet of %s after 5 minutes: %v", name, err)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: contract.EtcdName(name) + "-0", Labels: sts.Spec.Template.Labels}}
	pod.Spec.Containers = []corev1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.8-0"}}
	if err := env.Client.Create(ctx, pod); err != nil {
		b.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		b.Fatal(err)
	}
}

// hangingListener accepts connections at address and never answers on
// them.
func hangingListener(b *testing.B, address string) net.Listener {
	b.Helper()
	l, err := net.Listen("tcp", address)
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
	for deadline := time.Now().Add(time.Hour); ; time.Sleep(2 * time.Second) {
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
			b.Fatalf("%d of %d control planes with every certificate issued after an hour", issued, n)
		}
	}
}
