package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/local"
)

// concurrentClusters is how many Clusters BenchmarkConcurrentControlPlanes
// creates at once.
const concurrentClusters = 10

// BenchmarkConcurrentControlPlanes prints, as BENCH lines, the time from the
// first of concurrentClusters Clusters created in one go (one API server and
// one etcd member each, besides the two controller managers and two
// schedulers of every control plane; created one after another with nothing
// awaited between) to
// the last of their control planes seen Available by a watch
// (concurrent_10_available_s), and of each control plane's own time from its
// Cluster created to Available, the median and the longest. The timeline
// printed is each stage's median over the ten.
func BenchmarkConcurrentControlPlanes(b *testing.B) {
	ns := namespace(b, "bench-concurrent")
	keys := make([]client.ObjectKey, concurrentClusters)
	timelines := make([]*timeline, concurrentClusters)
	for i := range keys {
		keys[i] = client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("concurrent-%d", i)}
		timelines[i] = watchTimeline(b, keys[i])
		apply(b, ns, hostedCluster(keys[i].Name, images.KubeVersion, 1, 1))
	}
	var last time.Time
	var each []time.Duration
	for i, tl := range timelines {
		tl.waitAvailable(b, keys[i], 20*time.Minute)
		if at := tl.start.Add(tl.available); at.After(last) {
			last = at
		}
		each = append(each, tl.available)
	}
	all := last.Sub(timelines[0].start)
	slices.Sort(each)
	median := &timeline{stages: medianStages(timelines)}
	// Printed, not logged: the testing package keeps ten lines of a
	// benchmark's log.
	fmt.Printf("timeline of %d control planes created at once, each stage's median:%s\n", concurrentClusters, median)
	fmt.Printf("BENCH concurrent_%d_available_s %.3f s\n", concurrentClusters, all.Seconds())
	fmt.Printf("BENCH concurrent_%d_each_available_median_s %.3f s\n", concurrentClusters, each[len(each)/2].Seconds())
	fmt.Printf("BENCH concurrent_%d_each_available_max_s %.3f s\n", concurrentClusters, each[len(each)-1].Seconds())
	deleteClusters(b, keys...)
	// The memory of their pods is back before the next benchmark.
	podsAndClaimsGone(b, ns)
}

const (
	// idleBatch is how many control planes BenchmarkIdleDensity adds at a
	// time.
	idleBatch = 5
	// idleDefaultMax is BenchmarkIdleDensity's cap when BENCH_IDLE_MAX is
	// not set.
	idleDefaultMax = 40
	// idleMemoryFloor is the host's MemAvailable, in bytes, under which
	// BenchmarkIdleDensity adds no more: the management cluster runs on
	// the same host.
	idleMemoryFloor = 2 << 30
	// idleSettle is how long each batch idles, once Available, before
	// every control plane is checked.
	idleSettle = time.Minute
)

// BenchmarkIdleDensity prints, as a BENCH line, how many control planes of
// one API server and one etcd member this host holds idle with every one
// still answering (idle_control_planes_per_host). It adds them idleBatch at
// a time; once a batch is Available and has idled for idleSettle, every
// control plane so far must still be Available and serve, from the host
// through its Cluster's kubeconfig, a read that reaches its etcd. The figure
// is the count at the last check every one passed. It stops when a batch is
// not Available within ten minutes, when a control plane fails its check,
// when the next batch would take the host's MemAvailable under
// idleMemoryFloor (judged by what each control plane so far took) or at the
// cap BENCH_IDLE_MAX (idleDefaultMax by default), in which case the figure
// is a lower bound; when a batch failed, the host's limit lies between the
// figure and the figure plus idleBatch. It says why it stopped, with the
// host's memory and load.
func BenchmarkIdleDensity(b *testing.B) {
	limit := idleDefaultMax
	if v := os.Getenv("BENCH_IDLE_MAX"); v != "" {
		var err error
		limit, err = strconv.Atoi(v)
		require.NoError(b, err, "BENCH_IDLE_MAX")
	}
	ns := namespace(b, "bench-idle")
	idle := &idleFleet{ns: ns, memStart: memAvailable(b)}
	reason := idle.grow(b, limit)
	mem, load := meminfo(b), loadavg(b)
	var rss float64
	for _, key := range idle.keys[:idle.held] {
		byComponent, _ := controlPlaneRSS(b, ns, key.Name)
		for _, m := range byComponent {
			rss += m.rss
		}
	}
	fmt.Printf("BENCH idle_control_planes_per_host %d control-planes\n", idle.held)
	fmt.Printf("  stopped: %s\n", reason)
	fmt.Printf("  host with %d control planes created: MemTotal %.1f GiB, MemAvailable %.1f GiB (%.1f GiB before the first), load averages %s\n",
		len(idle.keys), gib(*mem.MemTotalBytes), gib(*mem.MemAvailableBytes), gib(idle.memStart), load)
	if idle.held > 0 {
		fmt.Printf("  each control plane held has containers of %.0f MiB resident on average\n", rss/float64(idle.held))
	}
	deleteClusters(b, idle.keys...)
	podsAndClaimsGone(b, ns)
}

// idleFleet is BenchmarkIdleDensity's control planes, all in one
// namespace.
type idleFleet struct {
	ns string
	// keys are every control plane created, held or not.
	keys []client.ObjectKey
	// held is how many of keys were all answering at the last check.
	held int
	// hosted are the clients of the held control planes, reused from one
	// check to the next.
	hosted []*kubernetes.Clientset
	// memStart is the host's MemAvailable before the first, in bytes.
	memStart uint64
}

// grow adds batches until one of the stop conditions, and says which.
func (f *idleFleet) grow(b *testing.B, limit int) string {
	start := time.Now()
	for {
		if f.held >= limit {
			return fmt.Sprintf("at the cap BENCH_IDLE_MAX=%d (a lower bound)", limit)
		}
		n := min(idleBatch, limit-f.held)
		avail := int64(memAvailable(b))
		var each int64 // what each control plane so far took
		if f.held > 0 {
			each = max(int64(f.memStart)-avail, 0) / int64(f.held)
		}
		if avail-int64(n)*each < idleMemoryFloor {
			return fmt.Sprintf("%d more would take MemAvailable (%.1f GiB, %.2f GiB taken by each control plane so far) under %.0f GiB",
				n, gib(uint64(avail)), gib(uint64(each)), gib(idleMemoryFloor))
		}
		batch := f.add(b, n)
		for _, key := range batch {
			if err := local.WaitAvailable(b.Context(), k8s, key, 10*time.Minute); err != nil {
				return fmt.Sprintf("a batch of %d was not Available within 10 minutes: %v", n, err)
			}
		}
		for _, key := range batch {
			hosted, err := kubernetes.NewForConfig(hostedConfig(b, key.Namespace, key.Name))
			require.NoError(b, err)
			f.hosted = append(f.hosted, hosted)
		}
		before := cpuTimes(b)
		time.Sleep(idleSettle)
		busy := cpuTimes(b).busySince(before)
		for i, hosted := range f.hosted {
			if err := answers(b.Context(), f.keys[i], hosted); err != nil {
				return fmt.Sprintf("control plane %s stopped answering at %d: %v", f.keys[i].Name, len(f.hosted), err)
			}
		}
		f.held = len(f.hosted)
		fmt.Printf("  idle: %d control planes answering at %s, CPU %.0f%% busy over the idle minute, MemAvailable %.1f GiB, load averages %s\n",
			f.held, time.Since(start).Round(time.Second), 100*busy, gib(memAvailable(b)), loadavg(b))
	}
}

// add creates n Clusters, one after another, and returns their keys.
func (f *idleFleet) add(b *testing.B, n int) []client.ObjectKey {
	first := len(f.keys)
	for i := first; i < first+n; i++ {
		key := client.ObjectKey{Namespace: f.ns, Name: fmt.Sprintf("idle-%d", i)}
		apply(b, f.ns, hostedCluster(key.Name, images.KubeVersion, 1, 1))
		f.keys = append(f.keys, key)
	}
	return f.keys[first:]
}

// answers tells whether a control plane is still Available and its API
// server, through the client given, reads the default Namespace: a
// consistent read, which etcd must answer too, where /version would not
// need it. A request that fails is tried again for a minute, since the
// host's two cores may be busy.
func answers(ctx context.Context, key client.ObjectKey, hosted *kubernetes.Clientset) error {
	if err := local.WaitAvailable(ctx, k8s, key, time.Minute); err != nil {
		return err
	}
	return cluster.Poll(ctx, time.Minute, 5*time.Second, func(ctx context.Context) error {
		_, err := hosted.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		return err
	}, nil)
}

// meminfo is the host's /proc/meminfo.
func meminfo(b *testing.B) procfs.Meminfo {
	mi, err := hostProc(b).Meminfo()
	require.NoError(b, err)
	return mi
}

// memAvailable is the host's MemAvailable, in bytes.
func memAvailable(b *testing.B) uint64 { return *meminfo(b).MemAvailableBytes }

// loadavg is the host's load averages over 1, 5 and 15 minutes.
func loadavg(b *testing.B) string {
	l, err := hostProc(b).LoadAvg()
	require.NoError(b, err)
	return fmt.Sprintf("%.2f %.2f %.2f", l.Load1, l.Load5, l.Load15)
}

// cpuTime is the host's CPU time since boot, from /proc/stat, in seconds:
// all of it (guest time is counted in user already) and that spent idle or
// waiting for I/O.
type cpuTime struct{ total, idle float64 }

func cpuTimes(b *testing.B) cpuTime {
	st, err := hostProc(b).Stat()
	require.NoError(b, err)
	c := st.CPUTotal
	idle := c.Idle + c.Iowait
	return cpuTime{total: c.User + c.Nice + c.System + idle + c.IRQ + c.SoftIRQ + c.Steal, idle: idle}
}

// busySince is the share of the host's CPU time since before not spent idle
// or waiting for I/O.
func (after cpuTime) busySince(before cpuTime) float64 {
	total := after.total - before.total
	if total <= 0 {
		return 0
	}
	return (total - (after.idle - before.idle)) / total
}

// hostProc is the host's /proc.
func hostProc(b *testing.B) procfs.FS {
	fs, err := procfs.NewDefaultFS()
	require.NoError(b, err)
	return fs
}

// gib is bytes in GiB.
func gib(bytes uint64) float64 { return float64(bytes) / (1 << 30) }
