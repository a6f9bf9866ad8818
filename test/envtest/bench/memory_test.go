package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
)

// controlPlanes is how many control planes the memory benchmark runs.
const controlPlanes = 200

// BenchmarkControllerMemory runs the controller binary, lets it bring
// controlPlanes control planes up (cert-manager issuing 16 certificates for
// each), and reports its resident memory and its live heap after a garbage
// collection per control plane.
func BenchmarkControllerMemory(b *testing.B) {
	ctx := context.Background()
	proc, err := env.StartController(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = proc.Stop(30 * time.Second) }()
	time.Sleep(5 * time.Second)
	idle := rssMiB(b, proc)
	report("controller_rss_mib_idle", idle, "MiB")
	idleHeap := heapMiB(ctx, b, proc)

	ns := namespace(ctx, b)
	start := time.Now()
	hcps := make([]*v1alpha1.HostedControlPlane, controlPlanes)
	for i := range hcps {
		if hcps[i], err = createControlPlane(ctx, env.Client, ns, fmt.Sprintf("cp-%03d", i)); err != nil {
			b.Fatal(err)
		}
	}
	waitAllReady(ctx, b, hcps)
	report("time_to_ready_all_s", time.Since(start).Seconds(), "s")
	time.Sleep(10 * time.Second) // idle again
	loaded := rssMiB(b, proc)
	report("controller_rss_mib_loaded", loaded, "MiB")
	report("controller_rss_mib_per_cp", (loaded-idle)/controlPlanes, "MiB")
	report("controller_heap_mib_per_cp", (heapMiB(ctx, b, proc)-idleHeap)/controlPlanes, "MiB")
}

// heapMiB reads a process's live heap after a garbage collection.
func heapMiB(ctx context.Context, b *testing.B, p *envtest.Process) float64 {
	heap, err := p.HeapMiB(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return heap
}

// waitAllReady plays the workload controllers until every control plane has
// rolled out.
func waitAllReady(ctx context.Context, b *testing.B, hcps []*v1alpha1.HostedControlPlane) {
	deadline := time.Now().Add(25 * time.Minute)
	pending := hcps
	for len(pending) > 0 {
		if time.Now().After(deadline) {
			b.Fatalf("%d control planes not ready after 25 minutes", len(pending))
		}
		var mu sync.Mutex
		var next []*v1alpha1.HostedControlPlane
		var wg sync.WaitGroup
		for _, hcp := range pending {
			wg.Go(func() {
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(hcp), hcp); err == nil &&
					conditions.IsTrue(hcp, v1alpha1.ControllersReadyCondition) {
					return
				}
				playWorkloads(ctx, env.Client, hcp)
				mu.Lock()
				next = append(next, hcp)
				mu.Unlock()
			})
		}
		wg.Wait()
		pending = next
		time.Sleep(5 * time.Second)
	}
}

// rssMiB reads a process's resident memory.
func rssMiB(b *testing.B, p *envtest.Process) float64 {
	mib, err := p.RSSMiB()
	if err != nil {
		b.Fatal(err)
	}
	return mib
}
