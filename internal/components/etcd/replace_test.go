package etcd

import (
	"cmp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
)

// What etcd 3.6 leaves as its last words: the flag package's complaint on
// a flag it refuses (exit 2, before it logs anything), and zap's JSON lines
// on a database it cannot open or a log lost under it (then a panic).
const (
	badFlag = "invalid value \"not-a-number\" for flag -snapshot-count: parse error\nUsage:\n\n  etcd [flags]\n    Start an etcd server.\n"
	badDB   = `{"level":"info","ts":"2026-11-25T22:00:00Z","caller":"etcdmain/etcd.go:64","msg":"Running: "}` + "\n" +
		`{"level":"panic","ts":"2026-11-25T22:00:01Z","caller":"backend/backend.go:205","msg":"failed to open database","path":"/var/lib/etcd/data/member/snap/db","error":"invalid database"}` + "\n" +
		"panic: failed to open database\n\ngoroutine 1 [running]:\ngo.uber.org/zap/zapcore.CheckWriteAction.OnWrite(0x2, 0xc0001)\n"
	lostLog = "\tgo.etcd.io/raft/v3/log.go:324 +0x1a5\npanic: tocommit(812) is out of range [lastIndex(0)]. Was the raft log corrupted, truncated, or lost?\n\ngoroutine 170 [running]:\n"
)

// A member down is replaced only when it ran healthy on the very pod spec
// it fails with and its etcd ends by itself with an error, again: what
// changed is its data. A new spec is suspect, and anything that is not an
// exit of etcd's own (no node, no image, a kill for memory or by the
// liveness probe, a silent etcd) is no sign of lost data.
func TestDiagnose(t *testing.T) {
	crash := func(code int32, reason, message string) render.EtcdPod {
		return render.EtcdPod{Revision: "a", Waiting: "CrashLoopBackOff", Restarts: 4, Exit: &render.EtcdExit{Code: code, Reason: reason, Message: message}}
	}
	for name, tc := range map[string]struct {
		pod       render.EtcdPod
		healthyOn string
		// onClaim is the claim it ran healthy on; "c1" unless set.
		onClaim string
		cause   Cause
		says    string
	}{
		"a volume replaced by an empty one, at its first exit": {
			pod: func() render.EtcdPod { p := crash(2, "Error", lostLog); p.Restarts, p.Claim = 0, "c2"; return p }(), healthyOn: "a", cause: Lost,
			says: "its etcd container exited with code 2 (Error): panic: tocommit(812) is out of range [lastIndex(0)]. Was the raft log corrupted, truncated, or lost?",
		},
		"its wait for peers found its data lost, etcd never started": {
			pod: render.EtcdPod{Revision: "a", Waiting: "PodInitializing", LostData: true}, healthyOn: "a", cause: Lost,
			says: "its data directory is empty while etcd lists it as a voter that has run: its data is lost",
		},
		"its wait for peers found its data lost, on a spec it never ran healthy on (the rollout stops)": {
			pod: render.EtcdPod{Revision: "b", Waiting: "PodInitializing", LostData: true}, healthyOn: "a", cause: NewSpec,
			says: "its data directory is empty while etcd lists it as a voter that has run: its data is lost",
		},
		"a new volume, but a new spec too": {
			pod: func() render.EtcdPod { p := crash(2, "Error", badFlag); p.Revision, p.Claim = "b", "c2"; return p }(), healthyOn: "a", cause: NewSpec,
			says: `its etcd container exited with code 2 (Error): invalid value "not-a-number" for flag -snapshot-count: parse error`,
		},
		"a new volume, killed for its memory": {
			pod: func() render.EtcdPod { p := crash(137, "OOMKilled", ""); p.Claim = "c2"; return p }(), healthyOn: "a", cause: Elsewhere,
			says: "its etcd container exited with code 137 (OOMKilled)",
		},
		"a new volume, no claim recorded (a controller from before the record)": {
			pod: func() render.EtcdPod { p := crash(2, "Error", lostLog); p.Restarts, p.Claim = 1, "c2"; return p }(), healthyOn: "a", onClaim: "-", cause: Elsewhere,
			says: "its etcd container exited with code 2 (Error): panic: tocommit(812) is out of range [lastIndex(0)]. Was the raft log corrupted, truncated, or lost?",
		},
		"a database overwritten": {
			pod: crash(2, "Error", badDB), healthyOn: "a", cause: Data,
			says: "its etcd container exited with code 2 (Error): failed to open database: invalid database",
		},
		"a volume lost": {
			pod: crash(2, "Error", lostLog), healthyOn: "a", cause: Data,
			says: "its etcd container exited with code 2 (Error): panic: tocommit(812) is out of range [lastIndex(0)]. Was the raft log corrupted, truncated, or lost?",
		},
		"a flag etcd refuses, rolled out": {
			pod: func() render.EtcdPod { p := crash(2, "Error", badFlag); p.Revision = "b"; return p }(), healthyOn: "a", cause: NewSpec,
			says: `its etcd container exited with code 2 (Error): invalid value "not-a-number" for flag -snapshot-count: parse error`,
		},
		"never seen healthy":           {pod: crash(1, "Error", ""), cause: NewSpec, says: "its etcd container exited with code 1 (Error)"},
		"killed for its memory":        {pod: crash(137, "OOMKilled", ""), healthyOn: "a", cause: Elsewhere, says: "its etcd container exited with code 137 (OOMKilled)"},
		"killed by its liveness probe": {pod: crash(143, "Error", ""), healthyOn: "a", cause: Elsewhere, says: "its etcd container exited with code 143 (Error)"},
		"failed once": {
			pod: render.EtcdPod{Revision: "a", Waiting: "CrashLoopBackOff", Restarts: 1, Exit: &render.EtcdExit{Code: 1, Reason: "Error"}}, healthyOn: "a", cause: Elsewhere,
			says: "its etcd container exited with code 1 (Error)",
		},
		"runs but does not answer (a slow disk, a cut network)": {
			pod: render.EtcdPod{Revision: "a", Running: true, Restarts: 5, Exit: &render.EtcdExit{Code: 2, Reason: "Error"}}, healthyOn: "a", cause: Elsewhere,
			says: "its etcd container runs but etcd does not answer",
		},
		"no node (a cordoned one)": {
			pod: render.EtcdPod{Revision: "a", Waiting: "Unschedulable", Message: "0/1 nodes are available: 1 node(s) were unschedulable."}, healthyOn: "a", cause: Elsewhere,
			says: "its pod has no node: 0/1 nodes are available: 1 node(s) were unschedulable.",
		},
		"no image": {
			pod:       render.EtcdPod{Revision: "a", Waiting: "ImagePullBackOff", Message: "Back-off pulling image", Restarts: 3, Exit: &render.EtcdExit{Code: 2, Reason: "Error"}},
			healthyOn: "a", cause: Elsewhere, says: "its etcd container exited with code 2 (Error)",
		},
		"no pod": {healthyOn: "a", cause: Elsewhere, says: "it has no pod"},
	} {
		t.Run(name, func(t *testing.T) {
			claim := cmp.Or(tc.onClaim, "c1")
			if claim == "-" {
				claim = ""
			}
			if tc.pod.Claim == "" {
				tc.pod.Claim = "c1"
			}
			d := Diagnose(render.EtcdMember{Name: "demo-etcd-1", Pod: tc.pod}, tc.healthyOn, claim)
			assert.Equal(t, tc.cause, d.Cause)
			assert.Equal(t, tc.says, d.Says)
		})
	}
}

// The pod's status says what Diagnose reads: its spec's revision, the
// container's state and how it last ended.
func TestPodFacts(t *testing.T) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: "demo-etcd-5f"}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "etcd", RestartCount: 3,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: badFlag}},
		}}},
	}
	assert.Equal(t, render.EtcdPod{
		Revision: "demo-etcd-5f", Waiting: "CrashLoopBackOff", Message: "back-off 40s", Restarts: 3,
		Exit: &render.EtcdExit{Code: 2, Reason: "Error", Message: badFlag},
	}, podFacts(p))
	// The wait for peers exits with join.ExitLostData (3), again and again:
	// it is waiting for the kubelet's back-off, the last exit in its last
	// state. Another init container's exit with the same code is not it.
	lost := &corev1.Pod{Status: corev1.PodStatus{
		InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "restore", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
			{
				Name: joinContainerName, RestartCount: 2,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}},
			},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}},
	}}
	assert.Equal(t, render.EtcdPod{Waiting: "PodInitializing", LostData: true}, podFacts(lost))
	other := lost.DeepCopy()
	other.Status.InitContainerStatuses[1].LastTerminationState.Terminated.ExitCode = 1
	assert.False(t, podFacts(other).LostData, "an exit of the wait for another reason")
	other.Status.InitContainerStatuses[1].Name = "restore-2"
	other.Status.InitContainerStatuses[1].LastTerminationState.Terminated.ExitCode = 3
	assert.False(t, podFacts(other).LostData, "another init container's exit")
	pending := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "no node",
	}}}}
	assert.Equal(t, render.EtcdPod{Waiting: "Unschedulable", Message: "no node"}, podFacts(pending))
}

// A member down says why it is not back in EtcdReady: a rollout stuck at a
// member failing on its new spec, a member down for a reason outside its
// data, one whose data etcd refuses while the backoff, the limit or the
// quorum holds its replacement.
func TestDownMembers(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	sts := &appsv1.StatefulSet{Status: appsv1.StatefulSetStatus{CurrentRevision: "demo-etcd-a", UpdateRevision: "demo-etcd-b"}}
	fail := func(m *render.EtcdMembership, i int, revision string, since time.Duration, exit *render.EtcdExit) *render.EtcdMembership {
		m.Members[i].Healthy, m.Members[i].DownSince = false, now.Add(-since)
		m.Members[i].Pod = render.EtcdPod{Revision: revision, Waiting: "CrashLoopBackOff", Restarts: 3, Exit: exit}
		if exit == nil {
			m.Members[i].Pod = render.EtcdPod{Revision: revision, Waiting: "ContainerCreating"}
		}
		return m
	}
	flag := &render.EtcdExit{Code: 2, Reason: "Error", Message: badFlag}
	withHistory := func(m *render.EtcdMembership, ago ...time.Duration) *render.EtcdMembership {
		for _, a := range ago {
			m.Replacements = append(m.Replacements, render.EtcdReplacement{Member: "demo-etcd-2", At: now.Add(-a)})
		}
		return m
	}
	for name, tc := range map[string]struct {
		m      *render.EtcdMembership
		reason string
		says   string
	}{
		"healthy":                                {m: membership(3)},
		"a new spec that starts":                 {m: fail(membership(3), 2, "demo-etcd-b", 10*time.Second, nil)},
		"an older spec the StatefulSet replaces": {m: fail(membership(3), 2, "demo-etcd-c", time.Hour, flag)},
		"a new spec that fails": {
			m: fail(membership(3), 2, "demo-etcd-b", 10*time.Second, flag), reason: v1alpha1.EtcdRolloutStuckReason,
			says: `the rollout of etcd stopped at member demo-etcd-2, which never ran healthy on its new pod spec (revision demo-etcd-b): ` +
				`its etcd container exited with code 2 (Error): invalid value "not-a-number" for flag -snapshot-count: parse error; ` +
				"no other member is updated, and none is replaced",
		},
		"killed for memory": {
			m: fail(membership(3), 1, "demo-etcd-a", time.Hour, &render.EtcdExit{Code: 137, Reason: "OOMKilled"}), reason: v1alpha1.EtcdMemberDownReason,
			says: "member demo-etcd-1 is down since 2026-11-23T11:00:00Z and is not replaced, since nothing says its data is lost: its etcd container exited with code 137 (OOMKilled)",
		},
		"killed for memory a moment ago": {m: fail(membership(3), 1, "demo-etcd-a", 10*time.Second, &render.EtcdExit{Code: 137, Reason: "OOMKilled"})},
		"data refused, within the backoff": {
			m:      withHistory(fail(membership(3), 2, "demo-etcd-a", time.Hour, &render.EtcdExit{Code: 2, Reason: "Error", Message: lostLog}), 5*time.Minute),
			reason: v1alpha1.EtcdMemberDownReason, says: "it is replaced at 2026-11-23T12:05:00Z, 10m0s after the last replacement (of demo-etcd-2)",
		},
		"data refused, replaced as often as it may be": {
			m:      withHistory(fail(membership(3), 2, "demo-etcd-a", time.Hour, &render.EtcdExit{Code: 2, Reason: "Error"}), 23*time.Hour, 3*time.Hour, time.Hour),
			reason: v1alpha1.EtcdReplacementLimitReason, says: "it was replaced 3 times within 24h0m0s and is not replaced again before 2026-11-23T13:00:00Z",
		},
		"data refused, without a quorum": {
			m:      fail(fail(membership(3), 2, "demo-etcd-a", time.Hour, &render.EtcdExit{Code: 2, Reason: "Error"}), 1, "demo-etcd-a", time.Hour, &render.EtcdExit{Code: 2, Reason: "Error"}),
			reason: v1alpha1.EtcdMemberDownReason, says: "it is not replaced while the healthy voters are no quorum of all",
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := withEtcd(input(t, v1alpha1.EtcdSpec{}), tc.m)
			out, down := downMembers(in, sts, now)
			assert.Equal(t, tc.reason != "", down)
			assert.Equal(t, tc.reason, out.Reason)
			assert.Contains(t, out.Message, tc.says)
			assert.False(t, out.Done)
		})
	}
}

// Each replacement within a day doubles the wait before the next, and a
// member is replaced at most three times a day.
func TestMayReplace(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(member string, ago time.Duration) render.EtcdReplacement {
		return render.EtcdReplacement{Member: member, At: now.Add(-ago)}
	}
	for name, tc := range map[string]struct {
		history []render.EtcdReplacement
		when    time.Time
		limited bool
	}{
		"none before":           {when: now},
		"one long ago":          {history: []render.EtcdReplacement{at("m-1", 25*time.Hour)}, when: now},
		"one 5m ago":            {history: []render.EtcdReplacement{at("m-0", 5*time.Minute)}, when: now.Add(5 * time.Minute)},
		"two, the last 15m ago": {history: []render.EtcdReplacement{at("m-0", time.Hour), at("m-2", 15*time.Minute)}, when: now.Add(5 * time.Minute)},
		"three of it in a day": {
			history: []render.EtcdReplacement{at("m-1", 20*time.Hour), at("m-1", 10*time.Hour), at("m-1", 5*time.Hour)},
			when:    now.Add(4 * time.Hour), limited: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			when, limited, ok := mayReplace(tc.history, "m-1", now)
			assert.Equal(t, tc.when, when)
			assert.Equal(t, tc.limited, limited)
			assert.Equal(t, !tc.limited && !tc.when.After(now), ok)
		})
	}
}

// The records survive the controller: written on the members ConfigMap,
// read back as the next pass observes them, and written only when they
// change. A member etcd no longer lists is forgotten; one that is down keeps
// what it last ran healthy on.
func TestRecords(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	in := input(t, v1alpha1.EtcdSpec{})
	cm := membersConfigMap(in)
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(cm).Build()
	component := Component{Writer: c}
	m := membership(3)
	m.HealthyRevisions = map[string]string{"demo-etcd-1": "demo-etcd-old", "demo-etcd-7": "demo-etcd-old"}
	m.HealthyClaims = map[string]string{"demo-etcd-1": "claim-old", "demo-etcd-7": "claim-old"}
	m.Members[1].Healthy = false
	m.Members[1].Pod.Claim = "claim-new"
	m.Members[2].Pod.Revision = "demo-etcd-b"
	m.Members[2].Pod.Claim = "claim-2"
	require.NoError(t, component.recordHealthy(t.Context(), c, withEtcd(in, m)))
	require.NoError(t, component.recordReplacement(t.Context(), c, withEtcd(in, m), "demo-etcd-1", now))

	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(cm), cm))
	got := &render.EtcdMembership{}
	records(got, cm)
	assert.Equal(t, map[string]string{"demo-etcd-0": "demo-etcd-a", "demo-etcd-1": "demo-etcd-old", "demo-etcd-2": "demo-etcd-b"}, got.HealthyRevisions)
	assert.Equal(t, map[string]string{"demo-etcd-1": "claim-old", "demo-etcd-2": "claim-2"}, got.HealthyClaims,
		"a member down keeps the volume it ran healthy on")
	assert.Equal(t, []render.EtcdReplacement{{Member: "demo-etcd-1", At: now}}, got.Replacements)

	m.HealthyRevisions, m.HealthyClaims = got.HealthyRevisions, got.HealthyClaims
	version := cm.ResourceVersion
	require.NoError(t, component.recordHealthy(t.Context(), c, withEtcd(in, m)))
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(cm), cm))
	assert.Equal(t, version, cm.ResourceVersion, "nothing written when nothing changed")
}

// Each member's pod is told the claim of its volume; a claim on its way out
// is none.
func TestWithClaims(t *testing.T) {
	claim := func(name, uid string, deleting bool) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data-" + name, UID: types.UID(uid)}}
		if deleting {
			c.DeletionTimestamp, c.Finalizers = &metav1.Time{Time: time.Now()}, []string{"kubernetes.io/pvc-protection"}
		}
		return c
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(claim("demo-etcd-0", "u0", false), claim("demo-etcd-1", "u1", true)).Build()
	m := membership(3)
	require.NoError(t, withClaims(t.Context(), c, "default", m))
	assert.Equal(t, []string{"u0", "", ""}, []string{m.Members[0].Pod.Claim, m.Members[1].Pod.Claim, m.Members[2].Pod.Claim})
}
