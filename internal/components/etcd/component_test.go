package etcd

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/apply"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/rollout"
)

// input is the Input of a control plane demo/default with the etcd spec.
func input(t *testing.T, etcd v1alpha1.EtcdSpec) render.Input {
	t.Helper()
	cp := &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"}}
	cp.Spec.Version, cp.Spec.Etcd = "v1.36.3", etcd
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"}}
	cluster.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
	in, err := render.NewInput(cp, cluster, render.DefaultSettings())
	require.NoError(t, err)
	return in
}

// The rendered flag follows spec.etcd.volumeSize unless spec.etcd.args sets
// the quota, and EtcdQuotaOf, which the upgrade gates use, says the same.
func TestQuotaFlag(t *testing.T) {
	for name, tc := range map[string]struct {
		volume *resource.Quantity
		args   map[string]string
		want   string
	}{
		"default volume": {want: "738197504"},
		"8Gi":            {volume: ptr.To(resource.MustParse("8Gi")), want: "3758096384"},
		"user quota":     {volume: ptr.To(resource.MustParse("8Gi")), args: map[string]string{"quota-backend-bytes": "4294967296"}, want: "4294967296"},
	} {
		t.Run(name, func(t *testing.T) {
			in := input(t, v1alpha1.EtcdSpec{VolumeSize: tc.volume, Container: v1alpha1.Container{Args: tc.args}})
			assert.Contains(t, statefulSet(in).Spec.Template.Spec.Containers[0].Args, "--quota-backend-bytes="+tc.want)
			assert.Equal(t, tc.want, strconv.FormatInt(contract.EtcdQuotaOf(in.ControlPlane), 10))
		})
	}
}

// versionedFlag is a case of a flag whose default depends on etcd's
// version: the control plane's version, the image tag set, spec.etcd.args,
// and the flags etcd gets (none when empty).
type versionedFlag struct {
	version string
	tag     *string
	args    map[string]string
	want    []string
}

// flagsFor renders etcd's StatefulSet for tc and returns its etcd
// container's arguments that contain flag.
func (tc versionedFlag) flagsFor(t *testing.T, flag string) []string {
	t.Helper()
	spec := v1alpha1.EtcdSpec{Container: v1alpha1.Container{Args: tc.args}}
	if tc.tag != nil {
		spec.Image = &v1alpha1.ImageSpec{Tag: tc.tag}
	}
	in := input(t, spec)
	in.ControlPlane.Spec.Version = tc.version
	in, err := render.NewInput(in.ControlPlane, in.Cluster, in.Settings)
	require.NoError(t, err)
	var flags []string
	for _, arg := range statefulSet(in).Spec.Template.Spec.Containers[0].Args {
		if strings.Contains(arg, flag) {
			flags = append(flags, arg)
		}
	}
	return flags
}

// etcd 3.6 and later hold MaxLearners learners at once; 3.5 knows no such
// flag and holds one, and a tag that is no version gets etcd's default.
func TestMaxLearnersFlag(t *testing.T) {
	for name, tc := range map[string]versionedFlag{
		"etcd 3.6 of Kubernetes 1.36": {version: "v1.36.3", want: []string{"--max-learners=2"}},
		"etcd 3.5 of Kubernetes 1.33": {version: "v1.33.4"},
		"a 3.5 image on 1.36":         {version: "v1.36.3", tag: ptr.To("3.5.21-0")},
		"a 3.6 image on 1.33":         {version: "v1.33.4", tag: ptr.To("v3.6.0"), want: []string{"--max-learners=2"}},
		"a tag that is no version":    {version: "v1.36.3", tag: ptr.To("latest")},
		"set by the user":             {version: "v1.36.3", args: map[string]string{"max-learners": "1"}, want: []string{"--max-learners=1"}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.flagsFor(t, "--max-learners"))
		})
	}
}

// Members skip etcd's DNS check of a peer's certificate under the flag's
// name in their etcd's version; a user may turn the check back on.
func TestPeerSANCheckSkipped(t *testing.T) {
	for name, tc := range map[string]versionedFlag{
		"etcd 3.6 of Kubernetes 1.36": {version: "v1.36.3", want: []string{"--peer-skip-client-san-verification=true"}},
		"etcd 3.5 of Kubernetes 1.33": {version: "v1.33.4", want: []string{"--experimental-peer-skip-client-san-verification=true"}},
		"a 3.6 image on 1.33":         {version: "v1.33.4", tag: ptr.To("v3.6.0"), want: []string{"--peer-skip-client-san-verification=true"}},
		"a tag that is no version":    {version: "v1.36.3", tag: ptr.To("latest")},
		"checked at the user's word": {
			version: "v1.36.3", args: map[string]string{"peer-skip-client-san-verification": "false"},
			want: []string{"--peer-skip-client-san-verification=false"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.flagsFor(t, "skip-client-san-verification"))
		})
	}
}

// One member has no disruption budget: it could only ever allow the one
// member to go.
func TestDisruptionBudgetKeepsQuorum(t *testing.T) {
	for replicas, want := range map[int32]bool{1: false, 3: true, 5: true} {
		objs, err := Component{}.Render(input(t, v1alpha1.EtcdSpec{Replicas: ptr.To(replicas)}))
		require.NoError(t, err)
		var budgets int
		for _, obj := range objs {
			if _, ok := obj.(*policyv1.PodDisruptionBudget); ok {
				budgets++
			}
		}
		assert.Equal(t, want, budgets == 1, "%d members", replicas)
	}
}

// The tag table spans exactly the minor versions admission lets through,
// with an entry of its own for each.
func TestTagsCoverTheSupportedVersions(t *testing.T) {
	minors := map[uint64]bool{}
	for _, e := range versions {
		minors[e.Minor] = true
	}
	for minor := uint64(v1alpha1.MinKubernetesMinor); minor <= v1alpha1.MaxKubernetesMinor; minor++ {
		require.True(t, v1alpha1.IsSupportedVersion(semver.Version{Major: v1alpha1.KubernetesMajor, Minor: minor}))
		assert.True(t, minors[minor], "etcd has no tag for minor %d", minor)
	}
	assert.Equal(t, uint64(v1alpha1.MinKubernetesMinor), versions[0].Minor)
	assert.Equal(t, uint64(v1alpha1.MaxKubernetesMinor), versions[len(versions)-1].Minor)
}

// membership is an answering etcd of the control plane demo with members
// 0..n-1 as voters, healthy, member 0 leading.
// Each runs the pod spec of revision demo-etcd-a, which each ran healthy on.
func membership(n int) *render.EtcdMembership {
	m := &render.EtcdMembership{Answered: true, Existing: true, HealthyRevisions: map[string]string{}}
	for i := range n {
		m.Members = append(m.Members, render.EtcdMember{
			Name: podName("demo", i), ID: uint64(0xa0 + i), Healthy: true, Leader: i == 0,
			Pod: render.EtcdPod{Revision: "demo-etcd-a", Running: true},
		})
		m.HealthyRevisions[podName("demo", i)] = "demo-etcd-a"
	}
	return m
}

func withEtcd(in render.Input, m *render.EtcdMembership) render.Input {
	in.Etcd = m
	return in
}

// One change at a time towards spec.etcd.replicas: a learner is promoted
// before anything else, members are added on the lowest free ordinals, up
// to MaxLearners at once and none while a learner is listed, and removed
// from the highest.
func TestNextChange(t *testing.T) {
	learner := func(m *render.EtcdMembership, i int, healthy bool) *render.EtcdMembership {
		m.Members = append(m.Members, render.EtcdMember{Name: podName("demo", i), ID: uint64(0xf0 + i), Learner: true, Healthy: healthy})
		return m
	}
	gap := membership(3)
	gap.Members = slices.Delete(gap.Members, 1, 2)
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	// down: the members' etcd ends by itself on the spec it ran healthy
	// on, as on a volume whose data was lost.
	down := func(m *render.EtcdMembership, since time.Duration, members ...int) *render.EtcdMembership {
		for _, i := range members {
			m.Members[i].Healthy, m.Members[i].DownSince = false, now.Add(-since)
			m.Members[i].Pod = render.EtcdPod{Revision: "demo-etcd-a", Waiting: "CrashLoopBackOff", Restarts: 3, Exit: &render.EtcdExit{Code: 2, Reason: "Error"}}
		}
		return m
	}
	stuck := func(m *render.EtcdMembership, i int) *render.EtcdMembership {
		m = down(m, time.Hour, i)
		m.Members[i].Pod.Revision = "demo-etcd-b"
		return m
	}
	elsewhere := func(m *render.EtcdMembership, i int) *render.EtcdMembership {
		m = down(m, time.Hour, i)
		m.Members[i].Pod.Exit = &render.EtcdExit{Code: 137, Reason: "OOMKilled"}
		return m
	}
	// newVolume: the member crashed once, on a claim other than the one it
	// ran healthy on.
	newVolume := func(m *render.EtcdMembership, since time.Duration, i int) *render.EtcdMembership {
		m = down(m, since, i)
		m.Members[i].Pod.Restarts, m.Members[i].Pod.Claim = 0, "claim-new"
		m.HealthyClaims = map[string]string{m.Members[i].Name: "claim-old"}
		return m
	}
	// lostData: the member's wait for peers found its data directory empty
	// while etcd lists it as a voter that has run; etcd never started.
	lostData := func(m *render.EtcdMembership, since time.Duration, i int) *render.EtcdMembership {
		m = down(m, since, i)
		m.Members[i].Pod = render.EtcdPod{Revision: "demo-etcd-a", Waiting: "PodInitializing", LostData: true}
		return m
	}
	replaced := func(m *render.EtcdMembership, ago ...time.Duration) *render.EtcdMembership {
		for _, a := range ago {
			m.Replacements = append(m.Replacements, render.EtcdReplacement{Member: "demo-etcd-1", At: now.Add(-a)})
		}
		return m
	}
	for name, tc := range map[string]struct {
		replicas int32
		m        *render.EtcdMembership
		want     string
	}{
		"nothing runs yet":       {replicas: 3, m: nil},
		"etcd does not answer":   {replicas: 3, m: &render.EtcdMembership{Members: membership(1).Members}},
		"as asked":               {replicas: 3, m: membership(3)},
		"grow":                   {replicas: 3, m: membership(1), want: "adding members demo-etcd-1 and demo-etcd-2 as learners"},
		"grow by one":            {replicas: 3, m: membership(2), want: "adding member demo-etcd-2 as a learner"},
		"grow by four":           {replicas: 5, m: membership(1), want: "adding members demo-etcd-1 and demo-etcd-2 as learners"},
		"fill a gap":             {replicas: 3, m: gap, want: "adding member demo-etcd-1 as a learner"},
		"fill a gap and grow":    {replicas: 5, m: gap, want: "adding members demo-etcd-1 and demo-etcd-3 as learners"},
		"a learner that answers": {replicas: 3, m: learner(membership(1), 1, true), want: "promoting member demo-etcd-1 to a voter"},
		"a learner not started":  {replicas: 3, m: learner(membership(1), 1, false)},
		"the second learner answers first": {
			replicas: 3, m: learner(learner(membership(1), 1, false), 2, true), want: "promoting member demo-etcd-2 to a voter",
		},
		"two learners not started": {replicas: 3, m: learner(learner(membership(1), 1, false), 2, false)},
		"a learner before removal": {replicas: 1, m: learner(membership(3), 3, true), want: "promoting member demo-etcd-3 to a voter"},
		"shrink":                   {replicas: 3, m: membership(5), want: "removing member demo-etcd-4"},
		"a voter down for long": {
			replicas: 3, m: down(membership(3), 2*time.Minute, 1),
			want: "replacing member demo-etcd-1, down since 2026-11-23T11:58:00Z on the pod spec it ran healthy on, as its etcd refuses its data " +
				"(its etcd container exited with code 2 (Error))",
		},
		"a voter down for a while": {replicas: 3, m: down(membership(3), 30*time.Second, 1)},
		"a voter on a new, empty volume, at once": {
			replicas: 3, m: newVolume(membership(3), 5*time.Second, 1),
			want: "replacing member demo-etcd-1, down since 2026-11-23T11:59:55Z on the pod spec it ran healthy on, as its etcd refuses its data " +
				"(its etcd container exited with code 2 (Error))",
		},
		"a voter whose data is lost, at once": {
			replicas: 3, m: lostData(membership(3), 5*time.Second, 1),
			want: "replacing member demo-etcd-1, down since 2026-11-23T11:59:55Z on the pod spec it ran healthy on " +
				"(its data directory is empty while etcd lists it as a voter that has run: its data is lost)",
		},
		"a voter whose data is lost, no quorum":       {replicas: 3, m: down(lostData(membership(3), 5*time.Second, 1), 5*time.Second, 2)},
		"a voter on a new volume, no quorum":          {replicas: 3, m: down(newVolume(membership(3), 5*time.Second, 1), 5*time.Second, 2)},
		"a voter on a new volume, within the backoff": {replicas: 3, m: replaced(newVolume(membership(3), 5*time.Second, 1), 5*time.Minute)},
		"two of three voters down":                    {replicas: 3, m: down(membership(3), 2*time.Minute, 1, 2)},
		"two of five voters down":                     {replicas: 5, m: down(membership(5), 2*time.Minute, 1, 3), want: "replacing member demo-etcd-1, " + "down since 2026-11-23T11:58:00Z on the pod spec it ran healthy on, as its etcd refuses its data (its etcd container exited with code 2 (Error))"},
		"three of five voters down":                   {replicas: 5, m: down(membership(5), 2*time.Minute, 1, 2, 3)},
		"the only voter down":                         {replicas: 1, m: down(membership(1), 2*time.Minute, 0)},
		"a voter failing on a new spec":               {replicas: 3, m: stuck(membership(3), 2)},
		"a voter killed for its memory":               {replicas: 3, m: elsewhere(membership(3), 2)},
		"within the backoff":                          {replicas: 3, m: replaced(down(membership(3), time.Hour, 2), 5*time.Minute)},
		"after the backoff":                           {replicas: 3, m: replaced(down(membership(3), time.Hour, 2), 11*time.Minute), want: "replacing member demo-etcd-2, down since 2026-11-23T11:00:00Z on the pod spec it ran healthy on, as its etcd refuses its data (its etcd container exited with code 2 (Error))"},
		"within the doubled backoff":                  {replicas: 3, m: replaced(down(membership(3), time.Hour, 2), 2*time.Hour, 15*time.Minute)},
		"a member replaced as often as it may":        {replicas: 3, m: replaced(down(membership(3), 30*time.Hour, 1), 20*time.Hour, 10*time.Hour, 5*time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			in := withEtcd(input(t, v1alpha1.EtcdSpec{Replicas: ptr.To(tc.replicas)}), tc.m)
			next, changes := NextChange(in, now)
			assert.Equal(t, tc.want != "", changes)
			if changes {
				assert.Equal(t, tc.want, next.String())
			}
		})
	}
}

// The StatefulSet runs a pod per member etcd lists, up to the highest
// ordinal, and the ConfigMap names them for a member that starts: a new
// cluster before etcd runs, the existing one afterwards.
func TestRenderFollowsTheMembership(t *testing.T) {
	for name, tc := range map[string]struct {
		m        *render.EtcdMembership
		pods     int32
		members  []string
		existing bool
	}{
		"new cluster": {pods: 3, members: []string{"demo-etcd-0", "demo-etcd-1", "demo-etcd-2"}},
		"a learner joins": {
			m:    &render.EtcdMembership{Existing: true, Members: append(membership(1).Members, render.EtcdMember{Name: "demo-etcd-1", Learner: true})},
			pods: 2, members: []string{"demo-etcd-0", "demo-etcd-1"}, existing: true,
		},
		"five running": {m: membership(5), pods: 5, members: []string{"demo-etcd-0", "demo-etcd-1", "demo-etcd-2", "demo-etcd-3", "demo-etcd-4"}, existing: true},
	} {
		t.Run(name, func(t *testing.T) {
			in := withEtcd(input(t, v1alpha1.EtcdSpec{}), tc.m)
			assert.Equal(t, ptr.To(tc.pods), statefulSet(in).Spec.Replicas)
			cm := membersConfigMap(in)
			var initial []string
			for _, name := range tc.members {
				initial = append(initial, name+"=https://"+name+".demo-etcd-peer.default.svc:2380")
			}
			assert.Equal(t, map[string]string{
				"ETCD_INITIAL_CLUSTER":       strings.Join(initial, ","),
				"ETCD_INITIAL_CLUSTER_STATE": map[bool]string{false: "new", true: "existing"}[tc.existing],
			}, cm.Data)
		})
	}
}

// Changes to a running etcd wait for a healthy one, with a condition that
// says what waits and why; a rollout under way may be corrected whatever
// etcd's health, and without etcd's member list nothing is resized.
func TestPreflightWaitsForAHealthyEtcd(t *testing.T) {
	in := input(t, v1alpha1.EtcdSpec{})
	empty := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
	out, err := Component{}.Preflight(t.Context(), empty, in)
	require.NoError(t, err)
	assert.True(t, out.Done, "nothing runs yet")

	running := applied(t, statefulSet(withEtcd(in, membership(3))))
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(running).Build()
	sick := membership(3)
	sick.Members[2].Healthy = false
	sick.Problems = []string{"member demo-etcd-2 does not answer"}

	// startingBeside: two learners added together, demo-etcd-1 answers and
	// demo-etcd-2 does not yet; only would tell that nothing else is wrong.
	startingBeside := func(only bool) *render.EtcdMembership {
		m := membership(1)
		m.Members = append(m.Members,
			render.EtcdMember{Name: "demo-etcd-1", ID: 0xf1, Learner: true, Healthy: true},
			render.EtcdMember{Name: "demo-etcd-2", ID: 0xf2, Learner: true})
		m.Problems, m.OnlyStartingLearners = []string{"member demo-etcd-2 does not answer"}, only
		return m
	}
	for name, tc := range map[string]struct {
		in   render.Input
		want readiness.Outcome
	}{
		"healthy and as asked":         {in: withEtcd(in, membership(3)), want: readiness.Ready("")},
		"unhealthy, nothing to change": {in: withEtcd(in, sick), want: readiness.Ready("")},
		"a learner's pod starts, which is no rollout": {
			in: withEtcd(input(t, v1alpha1.EtcdSpec{Replicas: ptr.To[int32](5)}), &render.EtcdMembership{
				Answered: true, Existing: true, Problems: []string{"member demo-etcd-3 has not started"},
				Members: append(membership(3).Members, render.EtcdMember{Name: "demo-etcd-3", ID: 0xf, Learner: true}),
			}),
			want: readiness.Ready(""),
		},
		"a learner that answers is promoted beside one still starting": {
			in:   withEtcd(in, startingBeside(true)),
			want: readiness.Ready(""),
		},
		"a promotion waits while more than a learner is wrong": {
			in: withEtcd(in, startingBeside(false)),
			want: readiness.Waiting(v1alpha1.EtcdUnhealthyReason,
				"waiting for a healthy etcd before promoting member demo-etcd-1 to a voter: member demo-etcd-2 does not answer"),
		},
		"a change waits for health": {
			in: withEtcd(input(t, v1alpha1.EtcdSpec{Replicas: ptr.To[int32](5)}), sick),
			want: readiness.Waiting(v1alpha1.EtcdUnhealthyReason,
				"waiting for a healthy etcd before adding members demo-etcd-3 and demo-etcd-4 as learners: member demo-etcd-2 does not answer"),
		},
		"a rollout waits for health": {
			in: withEtcd(input(t, v1alpha1.EtcdSpec{Container: v1alpha1.Container{Args: map[string]string{"snapshot-count": "5000"}}}), sick),
			want: readiness.Waiting(v1alpha1.EtcdUnhealthyReason,
				"waiting for a healthy etcd before rolling out a new spec of etcd: member demo-etcd-2 does not answer"),
		},
		"a rollout under NOSPACE, which may raise the quota": {
			in: withEtcd(input(t, v1alpha1.EtcdSpec{Container: v1alpha1.Container{Args: map[string]string{"quota-backend-bytes": "8589934592"}}}),
				&render.EtcdMembership{
					Answered: true, Existing: true, NoSpace: true, OnlyFull: true, Members: membership(3).Members,
					Problems: []string{"alarm NOSPACE is raised on member demo-etcd-1"},
				}),
			want: readiness.Ready(""),
		},
		"a rollout under NOSPACE with a database past its quota, as etcd leaves it": {
			in: withEtcd(input(t, v1alpha1.EtcdSpec{Container: v1alpha1.Container{Args: map[string]string{"quota-backend-bytes": "8589934592"}}}),
				&render.EtcdMembership{
					Answered: true, Existing: true, NoSpace: true, OnlyFull: true, Members: membership(3).Members,
					Problems: []string{
						"member demo-etcd-1 database is 225 MiB, 100% of its 224 MiB quota (limit 100%)",
						"alarm NOSPACE is raised on member demo-etcd-1",
					},
				}),
			want: readiness.Ready(""),
		},
		"no resize without the member list": {
			in:   input(t, v1alpha1.EtcdSpec{Replicas: ptr.To[int32](5)}),
			want: readiness.Waiting(v1alpha1.EtcdUnhealthyReason, "waiting for etcd to answer before changing its members from 3 to 5"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := Component{}.Preflight(t.Context(), c, tc.in)
			require.NoError(t, err)
			tc.want.Poll = !tc.want.Done
			assert.Equal(t, tc.want, out)
		})
	}

	// A rollout that raises the quota of a database past its own goes before
	// the databases are kept, which would hold it as long as etcd refuses
	// writes.
	full := &render.EtcdMembership{
		Answered: true, Existing: true, NoSpace: true, OnlyFull: true, Members: membership(3).Members,
		Problems: []string{"alarm NOSPACE is raised on member demo-etcd-1"},
	}
	for i := range full.Members {
		full.Members[i].Quota, full.Members[i].DBSize, full.Members[i].DBSizeInUse = 224<<20, 225<<20, 225<<20
	}
	raised := withEtcd(input(t, v1alpha1.EtcdSpec{Container: v1alpha1.Container{Args: map[string]string{"quota-backend-bytes": "8589934592"}}}), full)
	checker := NewChecker()
	t.Cleanup(checker.Close)
	out, err = Component{Clients: checker}.Preflight(t.Context(), c, raised)
	require.NoError(t, err)
	assert.Equal(t, readiness.Ready(""), out)

	// A rollout under way is corrected even while a member is down.
	rolling := running.DeepCopy()
	rolling.Status.CurrentRevision, rolling.Status.UpdateRevision = "a", "b"
	c = fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(rolling).Build()
	tuned := withEtcd(input(t, v1alpha1.EtcdSpec{Container: v1alpha1.Container{Args: map[string]string{"snapshot-count": "5000"}}}), sick)
	out, err = Component{}.Preflight(t.Context(), c, tuned)
	require.NoError(t, err)
	assert.True(t, out.Done)
}

// A pass stamps the StatefulSet with who rendered it and from which spec
// (package rollout), which restarts no pod: a spec change elsewhere is no
// rollout of etcd, and a learner added to etcd for more replicas gets its
// pod, whatever else waits to roll with it, while spec.rollout.after once
// reached is a rollout and waits for a healthy etcd. The merged e2e saw a
// learner wait for its pod for ever ("waiting for a healthy etcd before
// rolling out a new spec of etcd: member members-etcd-1 does not answer").
func TestPreflightSeesPodChangesOnly(t *testing.T) {
	stamped := func(in render.Input, generation int64) *appsv1.StatefulSet {
		t.Helper()
		sts := statefulSet(in)
		rollout.Stamp{RenderedBy: "v0.1.0+abc", Generation: generation, SpecHash: "h" + strconv.FormatInt(generation, 10)}.Apply(sts)
		return applied(t, sts)
	}
	at := func(in render.Input, generation int64, spec v1alpha1.EtcdSpec) render.Input {
		cp := in.ControlPlane.DeepCopy()
		cp.Generation, cp.Spec.Etcd = generation, spec
		in.ControlPlane = cp
		return in
	}
	one := withEtcd(input(t, v1alpha1.EtcdSpec{}), membership(1))
	sick := membership(3)
	sick.Members[2].Healthy = false
	sick.Problems = []string{"member demo-etcd-2 does not answer"}
	three := withEtcd(input(t, v1alpha1.EtcdSpec{}), membership(3))
	learning := membership(1)
	learning.Members = append(learning.Members, render.EtcdMember{Name: "demo-etcd-1", ID: 0xf, Learner: true})
	learning.Problems = []string{"member demo-etcd-1 does not answer"}
	scaled := v1alpha1.EtcdSpec{Replicas: ptr.To[int32](3)}
	tuned := v1alpha1.EtcdSpec{Replicas: ptr.To[int32](3), Container: v1alpha1.Container{Args: map[string]string{"snapshot-count": "5000"}}}
	restarted := at(withEtcd(three, sick), 3, v1alpha1.EtcdSpec{})
	restarted.ControlPlane.Spec.Rollout.After = metav1.NewTime(time.Now().Add(-time.Minute))

	for name, tc := range map[string]struct {
		live *appsv1.StatefulSet
		in   render.Input
		want readiness.Outcome
	}{
		"a spec change elsewhere while a member is down": {
			live: stamped(three, 2), in: at(withEtcd(three, sick), 3, v1alpha1.EtcdSpec{}), want: readiness.Ready(""),
		},
		"the learner added for more replicas gets its pod": {
			live: stamped(one, 2), in: at(withEtcd(one, learning), 3, scaled), want: readiness.Ready(""),
		},
		"the learner gets its pod with a new spec that rolls": {
			live: stamped(one, 2), in: at(withEtcd(one, learning), 3, tuned), want: readiness.Ready(""),
		},
		"spec.rollout.after reached waits for a healthy etcd": {
			live: stamped(three, 3), in: restarted,
			want: readiness.Waiting(v1alpha1.EtcdUnhealthyReason,
				"waiting for a healthy etcd before rolling out a new spec of etcd: member demo-etcd-2 does not answer"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(tc.live).Build()
			out, err := Component{}.Preflight(t.Context(), c, tc.in)
			require.NoError(t, err)
			tc.want.Poll = !tc.want.Done
			assert.Equal(t, tc.want, out)
		})
	}
}

// etcd is ready when every member runs the current spec and is ready; a
// StatefulSet just written is rolling out, whatever the cache says.
func TestReady(t *testing.T) {
	in := input(t, v1alpha1.EtcdSpec{})
	sts := statefulSet(in)
	sts.Generation = 2
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 2, UpdatedReplicas: 3, CurrentRevision: "a", UpdateRevision: "a"}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(sts).WithStatusSubresource(sts).Build()

	out, err := Component{}.Ready(t.Context(), c, in, readiness.Applied{Wrote: true})
	require.NoError(t, err)
	assert.Equal(t, readiness.RollingOut("etcd"), out)

	out, err = Component{}.Ready(t.Context(), c, in, readiness.Applied{})
	require.NoError(t, err)
	assert.Equal(t, readiness.Waiting(v1alpha1.ProgressingReason, "2 of 3 etcd members ready, 3 up to date"), out)

	sts.Status.ReadyReplicas = 3
	require.NoError(t, c.Status().Update(t.Context(), sts))
	out, err = Component{}.Ready(t.Context(), c, in, readiness.Applied{})
	require.NoError(t, err)
	assert.Equal(t, readiness.Ready("3 etcd members ready"), out)
}

// applied is sts as the applier stores it, with the digest of what it
// applied.
func applied(t *testing.T, sts *appsv1.StatefulSet) *appsv1.StatefulSet {
	t.Helper()
	u, err := apply.Unstructured(sts)
	require.NoError(t, err)
	out := &appsv1.StatefulSet{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out))
	return out
}

// Status reports the members etcd lists, and the smallest volume a member
// was given, from bound claims only.
func TestMembersAndVolumeSize(t *testing.T) {
	m := membership(2)
	m.Members = append(m.Members, render.EtcdMember{Name: "demo-etcd-2", ID: 0xff, Learner: true})
	assert.Equal(t, []string{"demo-etcd-0", "demo-etcd-1", "demo-etcd-2"}, Members(m))
	assert.Equal(t, []v1alpha1.EtcdMemberStatus{
		{Name: "demo-etcd-0", ID: "a0", Role: v1alpha1.EtcdVoter, Healthy: true},
		{Name: "demo-etcd-1", ID: "a1", Role: v1alpha1.EtcdVoter, Healthy: true},
		{Name: "demo-etcd-2", ID: "ff", Role: v1alpha1.EtcdLearner},
	}, MemberStatuses(m))
	assert.Equal(t, []string{"demo-etcd-0", "demo-etcd-1", "demo-etcd-2"}, Members(&render.EtcdMembership{Members: m.Members}), "as recorded")
	assert.Nil(t, MemberStatuses(&render.EtcdMembership{Members: m.Members}), "etcd did not answer")
	assert.Nil(t, Members(nil))

	claim := func(size string, phase corev1.PersistentVolumeClaimPhase) corev1.PersistentVolumeClaim {
		c := corev1.PersistentVolumeClaim{}
		c.Status.Phase = phase
		if size != "" {
			c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
		}
		return c
	}
	assert.Nil(t, VolumeSize(nil), "no etcd yet")
	assert.Nil(t, VolumeSize([]corev1.PersistentVolumeClaim{claim("", corev1.ClaimPending)}), "nothing bound yet")
	got := VolumeSize([]corev1.PersistentVolumeClaim{
		claim("8Gi", corev1.ClaimBound), claim("4Gi", corev1.ClaimBound), claim("1Gi", corev1.ClaimPending),
	})
	if assert.NotNil(t, got) {
		assert.Equal(t, "4Gi", got.String())
	}
}

// A member is defragmented once 64MiB of its database, and at least half of
// it, is unused, or under NOSPACE once anything is; the leader last.
func TestDefragTarget(t *testing.T) {
	sized := func(m *render.EtcdMembership, sizes ...[2]int64) *render.EtcdMembership {
		for i, s := range sizes {
			m.Members[i].DBSize, m.Members[i].DBSizeInUse = s[0]<<20, s[1]<<20
		}
		return m
	}
	for name, tc := range map[string]struct {
		m    *render.EtcdMembership
		want string
	}{
		"nothing unused":       {m: sized(membership(3), [2]int64{100, 100}, [2]int64{100, 100}, [2]int64{100, 100})},
		"little unused":        {m: sized(membership(3), [2]int64{100, 40}, [2]int64{100, 100}, [2]int64{100, 100})},
		"most of a small file": {m: sized(membership(3), [2]int64{40, 1}, [2]int64{40, 1}, [2]int64{40, 1})},
		"most of a large file": {m: sized(membership(3), [2]int64{200, 20}, [2]int64{200, 190}, [2]int64{200, 20}), want: "demo-etcd-2"},
		"the leader last":      {m: sized(membership(3), [2]int64{200, 20}, [2]int64{100, 100}, [2]int64{100, 100}), want: "demo-etcd-0"},
		"the others before it": {m: sized(membership(3), [2]int64{200, 20}, [2]int64{200, 20}, [2]int64{100, 100}), want: "demo-etcd-1"},
		"NOSPACE frees any space": {m: func() *render.EtcdMembership {
			m := sized(membership(3), [2]int64{100, 100}, [2]int64{100, 98})
			m.NoSpace = true
			return m
		}(), want: "demo-etcd-1"},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := defragTarget(tc.m)
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, got.Name)
		})
	}
}
