package e2e

import (
	"cmp"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/local"
)

// benchRuns is how many control planes BenchmarkHostedControlPlane creates
// one after another.
const benchRuns = 3

// BenchmarkHostedControlPlane prints, as BENCH lines: the time from a Cluster
// created to its control plane Available (median of benchRuns, two API
// servers and three etcd members each), and to each stage before (timeline,
// tta_<stage>_s, each the median of its own), the time etcd plus
// kube-apiserver take to start as plain processes on the same machine, their
// ratio, and the resident memory of one idle hosted control plane's
// containers, by component (hosted_cp_rss_mib_<component>) and summed, and
// the sum's anonymous part (hosted_cp_anon_mib);
// the same of the smallest shape, one API server and one etcd member, as it
// defaults (hosted_cp_1x1_rss_mib) and with two controller managers and two
// schedulers (hosted_cp_1x1_two_controllers_rss_mib). Times are those a
// watch observes, not a poll.
func BenchmarkHostedControlPlane(b *testing.B) {
	ns := namespace(b, "bench")
	var timelines []*timeline
	var rss, rssByContainer map[string]memory
	for i := range benchRuns {
		key := client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("bench-%d", i)}
		tl := watchTimeline(b, key)
		apply(b, ns, hostedCluster(key.Name, images.KubeVersion, 2, 3))
		tl.waitAvailable(b, key, 15*time.Minute)
		timelines = append(timelines, tl)
		// Printed, not logged: the testing package keeps ten lines of a
		// benchmark's log.
		fmt.Printf("timeline of %s:%s\n", key.Name, tl)
		if i == 0 {
			// Let it settle before measuring it idle.
			time.Sleep(30 * time.Second)
			rss, rssByContainer = controlPlaneRSS(b, ns, key.Name)
		}
		deleteClusters(b, key)
	}
	median := medianStages(timelines)
	available := median["available"].Seconds()

	// etcd and kube-apiserver alone, the same builds as the management
	// cluster's, started and awaited healthy by controller-runtime's envtest
	// with nothing installed.
	bare := &crenvtest.Environment{BinaryAssetsDirectory: filepath.Dir(images.HostBinaries(root)["kube-apiserver"])}
	start := time.Now()
	_, err := bare.Start()
	require.NoError(b, err)
	bareSeconds := time.Since(start).Seconds()
	require.NoError(b, bare.Stop())

	for _, stage := range stages {
		fmt.Printf("BENCH tta_%s_s %.3f s\n", stage, median[stage].Seconds())
	}
	fmt.Printf("BENCH time_to_available_s %.3f s\n", available)
	fmt.Printf("BENCH bare_apiserver_start_s %.3f s\n", bareSeconds)
	fmt.Printf("BENCH available_over_bare %.3f x\n", available/bareSeconds)
	printRSS("hosted_cp_rss_mib", rss, rssByContainer)

	// The smallest shape, one API server and one etcd member, as it
	// defaults (a controller manager and a scheduler) and with the two of
	// each it had before that default.
	for _, shape := range []struct{ name, deployment string }{
		{"hosted_cp_1x1_rss_mib", ""},
		{"hosted_cp_1x1_two_controllers_rss_mib", "  deployment: {controllerManager: {replicas: 2}, scheduler: {replicas: 2}}\n"},
	} {
		key := client.ObjectKey{Namespace: ns, Name: strings.ReplaceAll(strings.TrimSuffix(shape.name, "_rss_mib"), "_", "-")}
		apply(b, ns, hostedCluster(key.Name, images.KubeVersion, 1, 1)+shape.deployment)
		require.NoError(b, local.WaitAvailable(b.Context(), k8s, key, 15*time.Minute))
		time.Sleep(30 * time.Second)
		byComponent, byContainer := controlPlaneRSS(b, ns, key.Name)
		printRSS(shape.name, byComponent, byContainer)
		deleteClusters(b, key)
	}
}

// printRSS prints a BENCH line of the resident memory of each component,
// one of their sum, and one of the sum's anonymous part (name with _anon_
// for _rss_): the memory of the processes' own, without the pages of their
// binaries, which every control plane's pods of the same image share.
func printRSS(name string, byComponent, byContainer map[string]memory) {
	var total memory
	for _, component := range slices.Sorted(maps.Keys(byComponent)) {
		fmt.Printf("BENCH %s_%s %.3f MiB\n", name, component, byComponent[component].rss)
		total = total.plus(byComponent[component])
	}
	fmt.Printf("BENCH %s %.3f MiB\n", name, total.rss)
	fmt.Printf("BENCH %s %.3f MiB\n", strings.Replace(name, "_rss_", "_anon_", 1), total.anon)
	for _, container := range slices.Sorted(maps.Keys(byContainer)) {
		fmt.Printf("  %s %s: %.1f MiB resident, %.1f MiB anonymous\n", name, container, byContainer[container].rss, byContainer[container].anon)
	}
}

// memory is resident memory in MiB: all of it (VmRSS) and its anonymous
// part (RssAnon).
type memory struct{ rss, anon float64 }

func (m memory) plus(o memory) memory { return memory{m.rss + o.rss, m.anon + o.anon} }

// BenchmarkEtcdMembership prints, as BENCH lines, how long a hosted etcd
// takes from spec.etcd.replicas raised from 1 to 3 to three healthy voters,
// and from a member's pod and volume deleted to three healthy voters again
// (replaced at once, its volume being new), and
// how often the new members' containers restarted on the way (a member that
// joins cleanly starts once).
func BenchmarkEtcdMembership(b *testing.B) {
	ns := namespace(b, "bench-etcd")
	apply(b, ns, hostedCluster("bench-etcd", images.KubeVersion, 1, 1))
	key := client.ObjectKey{Namespace: ns, Name: "bench-etcd"}
	require.NoError(b, local.WaitAvailable(b.Context(), k8s, key, 15*time.Minute))
	tl := watchTimeline(b, key)
	setEtcdReplicas(b, key, 3)
	waitVoters(b, key, 3)
	scale := time.Since(tl.start)
	// Printed, not logged: the testing package keeps ten lines of a
	// benchmark's log.
	fmt.Printf("timeline of etcd from 1 to 3 members:%s\n", tl.etcdLog(key.Name))
	scaleRestarts := restarts(b, ns, "bench-etcd-etcd-1", "bench-etcd-etcd-2")
	replace := replaceMember(b, key, "bench-etcd-etcd-1")
	replaceRestarts := restarts(b, ns, "bench-etcd-etcd-1")
	deleteClusters(b, key)
	fmt.Printf("BENCH etcd_scale_1_to_3_s %.3f s\n", scale.Seconds())
	fmt.Printf("BENCH etcd_scale_restarts %d restarts\n", scaleRestarts)
	fmt.Printf("BENCH etcd_member_replace_s %.3f s\n", replace.Seconds())
	fmt.Printf("BENCH etcd_replace_restarts %d restarts\n", replaceRestarts)
}

// restarts sums the restarts of the containers of the pods named.
func restarts(b *testing.B, ns string, names ...string) int32 {
	var n int32
	for _, name := range names {
		pod := &corev1.Pod{}
		require.NoError(b, k8s.Get(b.Context(), client.ObjectKey{Namespace: ns, Name: name}, pod))
		for _, s := range pod.Status.ContainerStatuses {
			n += s.RestartCount
		}
	}
	return n
}

// restoreObjects is how many ConfigMaps BenchmarkEtcdRestore restores.
const restoreObjects = 10000

// BenchmarkEtcdRestore prints, as a BENCH line, how long a Cluster created
// again with restore: latest takes to be Available, its etcd restored from
// the final snapshot of the Cluster it replaces, which held restoreObjects
// ConfigMaps; all of them are then read back.
func BenchmarkEtcdRestore(b *testing.B) {
	ns := namespace(b, "bench-restore")
	key := client.ObjectKey{Namespace: ns, Name: "bench-restore"}
	store := startBackupStore(b, "backups")
	store.grant(b, ns)
	apply(b, ns, hostedCluster(key.Name, images.KubeVersion, 2, 3))
	require.NoError(b, local.WaitAvailable(b.Context(), k8s, key, 15*time.Minute))
	writeConfigMaps(b, key, restoreObjects)
	backUp(b, store, key, false)
	deleteClusters(b, key) // stores the final snapshot
	start := time.Now()
	apply(b, ns, restoredCluster(key.Name, store.secretNamespace, "", 2, 3))
	require.NoError(b, local.WaitAvailable(b.Context(), k8s, key, 15*time.Minute))
	restore := time.Since(start)
	everyConfigMapRestored(b, store, key, restoreObjects)
	deleteClusters(b, key)
	fmt.Printf("BENCH restore_10k_objects_s %.3f s\n", restore.Seconds())
}

// controlPlaneRSS is, by component (the pods' component label), the
// resident memory of every process in the containers of a Cluster's
// control plane pods, read from their cgroups, and the same by container
// (<component>/<container>; the pod's sandbox as "sandbox").
func controlPlaneRSS(b *testing.B, ns, name string) (byComponent, byContainer map[string]memory) {
	pods := &corev1.PodList{}
	require.NoError(b, k8s.List(b.Context(), pods, client.InNamespace(ns), client.MatchingLabels{"cluster.x-k8s.io/cluster-name": name}))
	require.NotEmpty(b, pods.Items)
	components := map[string]string{} // pod cgroup name: component
	containers := map[string]string{} // container ID: container name
	for _, p := range pods.Items {
		components["pod"+string(p.UID)] = p.Labels[contract.ComponentLabel]
		for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if _, id, ok := strings.Cut(c.ContainerID, "://"); ok {
				containers[id] = c.Name
			}
		}
	}
	proc := hostProc(b)
	byComponent, byContainer = map[string]memory{}, map[string]memory{}
	_ = filepath.WalkDir("/sys/fs/cgroup/memory", func(path string, d fs.DirEntry, err error) error {
		component, ours := components[d.Name()]
		if err != nil || !d.IsDir() || !ours {
			return nil //nolint:nilerr // a vanished cgroup holds nothing
		}
		_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.Name() != "cgroup.procs" {
				return nil //nolint:nilerr // as above
			}
			container := cmp.Or(containers[filepath.Base(filepath.Dir(p))], "sandbox")
			procs, _ := os.ReadFile(p)
			for _, pid := range strings.Fields(string(procs)) {
				n, _ := strconv.Atoi(pid)
				// A process gone meanwhile holds nothing.
				if p, err := proc.Proc(n); err == nil {
					if status, err := p.NewStatus(); err == nil {
						m := memory{rss: float64(status.VmRSS) / (1 << 20), anon: float64(status.RssAnon) / (1 << 20)}
						byComponent[component] = byComponent[component].plus(m)
						byContainer[component+"/"+container] = byContainer[component+"/"+container].plus(m)
					}
				}
			}
			return nil
		})
		return fs.SkipDir
	})
	return byComponent, byContainer
}
