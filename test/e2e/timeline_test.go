package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// The stages of a control plane's start, in the order they complete, as
// the BENCH lines name them (tta_<stage>_s).
var stages = []string{
	"certificates",    // every Certificate of the control plane issued
	"etcd_started",    // every etcd member's container running
	"etcd_quorum",     // a quorum of etcd members ready (etcd's /readyz: a leader, linearizable reads)
	"first_apiserver", // one API server pod ready
	"apiservers",      // every API server pod ready
	"controllers",     // every controller-manager and scheduler pod ready
	"available",       // the HostedControlPlane's Available condition true
}

// timeline records, through watches rather than polls, when each object of
// one control plane was first seen in each state, from the moment its
// Cluster was about to be created; the stages follow from them once it is
// Available (see stagesOf).
type timeline struct {
	start time.Time
	mu    sync.Mutex
	// pods and certificates are the last seen, by name.
	pods         map[string]*corev1.Pod
	certificates map[string]*cmv1.Certificate
	// created, started, ready and issued are when a pod was first seen,
	// its containers first all running, it first ready, a Certificate
	// first ready, by name.
	created, started, ready, issued map[string]time.Duration
	// requested is when each Certificate was first seen, owned when the
	// control plane was first seen owned by its Cluster (from then on the
	// controller keeps it).
	requested        map[string]time.Duration
	owned, available time.Duration
	done             chan struct{}
	// stages are when each stage completed, as of Available (see
	// stagesOf): the pods are deleted with their Cluster afterwards.
	stages map[string]time.Duration
	// podTimes says, of each pod that runs at Available, when it was
	// created, running and ready.
	podTimes []string
	// etcdSteps are what EtcdReady said, each when it was first seen.
	etcdSteps []string
}

// watchTimeline starts a timeline of the control plane key; call it just
// before creating its Cluster. It ends with the test.
func watchTimeline(t testing.TB, key client.ObjectKey) *timeline {
	t.Helper()
	tl := &timeline{
		start: time.Now(), pods: map[string]*corev1.Pod{}, certificates: map[string]*cmv1.Certificate{},
		created: map[string]time.Duration{}, started: map[string]time.Duration{}, ready: map[string]time.Duration{}, issued: map[string]time.Duration{},
		requested: map[string]time.Duration{},
		done:      make(chan struct{}),
	}
	c, err := client.NewWithWatch(mgmt.REST, client.Options{Scheme: k8s.Scheme()})
	require.NoError(t, err)
	ctx := testContext(t)
	ofCluster := []client.ListOption{client.InNamespace(key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name}}
	byName := []client.ListOption{client.InNamespace(key.Namespace), client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", key.Name)}}
	for _, w := range []struct {
		list client.ObjectList
		opts []client.ListOption
	}{{&corev1.PodList{}, ofCluster}, {&cmv1.CertificateList{}, ofCluster}, {&v1alpha1.HostedControlPlaneList{}, byName}} {
		// A first watch is open before the Cluster is created.
		first, err := c.Watch(ctx, w.list, w.opts...)
		require.NoError(t, err)
		go tl.follow(ctx, c, first, w.list, w.opts)
	}
	return tl
}

// follow records the events of one watch, opening another when the server
// ends it.
func (tl *timeline) follow(ctx context.Context, c client.WithWatch, w watch.Interface, list client.ObjectList, opts []client.ListOption) {
	for {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				tl.see(ev.Object)
			}
		}
		if ctx.Err() != nil {
			return
		}
		var err error
		if w, err = c.Watch(ctx, list, opts...); err != nil {
			return
		}
	}
}

func (tl *timeline) see(obj any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	now := time.Since(tl.start)
	first := func(at map[string]time.Duration, name string) {
		if _, seen := at[name]; !seen {
			at[name] = now
		}
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		tl.pods[o.Name] = o
		first(tl.created, o.Name)
		if running(o) {
			first(tl.started, o.Name)
		}
		if podReady(o) {
			first(tl.ready, o.Name)
		}
	case *cmv1.Certificate:
		tl.certificates[o.Name] = o
		first(tl.requested, o.Name)
		for _, c := range o.Status.Conditions {
			if c.Type == cmv1.CertificateConditionReady && c.Status == cmmeta.ConditionTrue {
				first(tl.issued, o.Name)
			}
		}
	case *v1alpha1.HostedControlPlane:
		if tl.owned == 0 && len(o.OwnerReferences) > 0 {
			tl.owned = now
		}
		if c := apimeta.FindStatusCondition(o.Status.Conditions, v1alpha1.EtcdReadyCondition); c != nil {
			step := fmt.Sprintf("%s: %s", c.Reason, c.Message)
			if n := len(tl.etcdSteps); n == 0 || !strings.HasSuffix(tl.etcdSteps[n-1], " "+step) {
				tl.etcdSteps = append(tl.etcdSteps, fmt.Sprintf("%.1fs %s", now.Seconds(), step))
			}
		}
		if tl.available == 0 && apimeta.IsStatusConditionTrue(o.Status.Conditions, v1alpha1.AvailableCondition) {
			tl.available = now
			close(tl.done)
		}
	}
}

// running tells whether every container of a pod runs.
func running(p *corev1.Pod) bool {
	if len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running == nil {
			return false
		}
	}
	return true
}

// waitAvailable waits for the control plane to be seen Available, and
// records its stages.
func (tl *timeline) waitAvailable(t testing.TB, key client.ObjectKey, timeout time.Duration) {
	t.Helper()
	select {
	case <-tl.done:
		tl.stages = tl.stagesOf()
	case <-time.After(timeout):
		hcp := &v1alpha1.HostedControlPlane{}
		_ = k8s.Get(testContext(t), key, hcp)
		t.Fatalf("HostedControlPlane %s not Available within %s:%v", key, timeout, hcp.Status.Conditions)
	}
}

// stagesOf is, once the control plane is Available, when each stage
// completed, since the Cluster was created: the pods it counts are those
// that run at the end (a pod replaced by a rollout does not count), and a
// stage counts each one from when it was first seen so.
func (tl *timeline) stagesOf() map[string]time.Duration {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	pods := map[string][]string{}
	tl.podTimes = nil
	for name, p := range tl.pods {
		if p.DeletionTimestamp == nil {
			c := p.Labels[contract.ComponentLabel]
			pods[c] = append(pods[c], name)
			tl.podTimes = append(tl.podTimes, fmt.Sprintf("%s created=%.1fs running=%.1fs ready=%.1fs",
				name, tl.created[name].Seconds(), tl.started[name].Seconds(), tl.ready[name].Seconds()))
		}
	}
	slices.Sort(tl.podTimes)
	latest := func(at map[string]time.Duration, names []string) time.Duration {
		var last time.Duration
		for _, n := range names {
			last = max(last, at[n])
		}
		return last
	}
	times := func(at map[string]time.Duration, names []string) []time.Duration {
		var out []time.Duration
		for _, n := range names {
			if d, ok := at[n]; ok {
				out = append(out, d)
			}
		}
		slices.Sort(out)
		return out
	}
	var certificates []string
	for name := range tl.certificates {
		certificates = append(certificates, name)
	}
	etcd := pods[contract.EtcdComponent]
	etcdReady := times(tl.ready, etcd)
	quorum := len(etcd)/2 + 1
	apiServers := times(tl.ready, pods[contract.APIServerComponent])
	out := map[string]time.Duration{
		"certificates": latest(tl.issued, certificates),
		"etcd_started": latest(tl.started, etcd),
		"controllers":  latest(tl.ready, append(pods[contract.ControllerManagerComponent], pods[contract.SchedulerComponent]...)),
		"available":    tl.available,
	}
	if len(etcdReady) >= quorum {
		out["etcd_quorum"] = etcdReady[quorum-1]
	}
	if len(apiServers) > 0 {
		out["first_apiserver"] = apiServers[0]
		out["apiservers"] = apiServers[len(apiServers)-1]
	}
	return out
}

// String is the timeline as of Available, for a log.
func (tl *timeline) String() string {
	out := ""
	for _, s := range stages {
		out += fmt.Sprintf(" %s=%.1fs", s, tl.stages[s].Seconds())
	}
	if len(tl.requested) > 0 {
		span := func(at map[string]time.Duration) string {
			times := slices.Sorted(maps.Values(at))
			if len(times) == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1fs..%.1fs", times[0].Seconds(), times[len(times)-1].Seconds())
		}
		out += fmt.Sprintf("\n  owned by its Cluster=%.1fs, %d certificates requested=%s issued=%s",
			tl.owned.Seconds(), len(tl.requested), span(tl.requested), span(tl.issued))
	}
	for _, p := range tl.podTimes {
		out += "\n  " + p
	}
	return out
}

// etcdLog is, for a log, when each etcd pod of the control plane
// named was created, running and ready, and what EtcdReady said meanwhile.
func (tl *timeline) etcdLog(name string) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []string
	for pod := range tl.pods {
		if strings.HasPrefix(pod, contract.EtcdName(name)+"-") {
			out = append(out, fmt.Sprintf("pod %s created=%.1fs running=%.1fs ready=%.1fs",
				pod, tl.created[pod].Seconds(), tl.started[pod].Seconds(), tl.ready[pod].Seconds()))
		}
	}
	slices.Sort(out)
	for _, step := range tl.etcdSteps {
		out = append(out, "etcd at "+step)
	}
	return "\n  " + strings.Join(out, "\n  ")
}

// medianStages is, for each stage, its median over the timelines.
func medianStages(timelines []*timeline) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, s := range stages {
		var ds []time.Duration
		for _, tl := range timelines {
			ds = append(ds, tl.stages[s])
		}
		slices.Sort(ds)
		out[s] = ds[len(ds)/2]
	}
	return out
}
