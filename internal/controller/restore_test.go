package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/backup"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
)

// stubRestorer stands in for backup.Restorer, whose store and Secret are
// tested in package backup and against a real S3 server in
// test/envtest/extension: here only what this reconciler records of its
// answers is.
type stubRestorer struct {
	key      string
	err      error
	prepared []backup.Request
}

func (f *stubRestorer) Prepare(_ context.Context, _ *v1alpha1.HostedControlPlane, _ string, req backup.Request) (string, error) {
	f.prepared = append(f.prepared, req)
	return f.key, f.err
}

func (f *stubRestorer) Restored(context.Context, *v1alpha1.HostedControlPlane, string) (string, error) {
	return "", nil
}

// restoreTest is a control plane stored in a fake API server, and what a
// pass over it needs to drive its restore in place.
type restoreTest struct {
	c        client.Client
	r        *Reconciler
	restorer *stubRestorer
	cluster  *clusterv1.Cluster
	in       render.Input
}

func newRestoreTest(t *testing.T, stored *v1alpha1.HostedControlPlane) *restoreTest {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(observedKinds()).WithObjects(stored).WithStatusSubresource(stored).Build()
	rt := &restoreTest{c: c, restorer: &stubRestorer{}}
	rt.r = &Reconciler{recorder: events.NewFakeRecorder(100), apiReader: c, restorer: rt.restorer}
	rt.cluster = &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo"}}
	rt.cluster.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
	var err error
	rt.in, err = render.NewInput(stored, rt.cluster, render.DefaultSettings())
	require.NoError(t, err)
	return rt
}

// pass runs restore over a copy of the control plane as a pass reads it,
// with what etcd's phase observed, and stores what it recorded as the patch
// helper does.
func (rt *restoreTest) pass(t *testing.T, hcp *v1alpha1.HostedControlPlane, o render.Observed) *scope {
	t.Helper()
	helper, err := patch.NewHelper(hcp, rt.c)
	require.NoError(t, err)
	s := &scope{hcp: hcp, cluster: rt.cluster, in: rt.in.With(o)}
	s.in.ControlPlane = hcp
	rt.r.restore(t.Context(), s)
	require.NoError(t, helper.Patch(t.Context(), hcp, patch.WithOwnedConditions{Conditions: ownedConditions()}))
	return s
}

func (rt *restoreTest) stored(t *testing.T) *v1alpha1.HostedControlPlane {
	t.Helper()
	got := &v1alpha1.HostedControlPlane{}
	require.NoError(t, rt.c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "demo"}, got))
	return got
}

func healthyMembers(n int) *render.EtcdMembership {
	m := &render.EtcdMembership{Answered: true, Existing: true}
	for i := range n {
		m.Members = append(m.Members, render.EtcdMember{Name: "demo-etcd-" + string(rune('0'+i)), ID: uint64(i + 1), Healthy: true})
	}
	return m
}

// A request of the restore-etcd annotation is taken once: a snapshot that
// cannot be had stops nothing and keeps the request; one that can is
// recorded in status.etcd.restoring while the request stays, and only a
// later pass, which reads the restore in the status, removes the request. A
// pass from a cached copy that does not show the restore yet does not take
// the request again. The restore ends only once etcd answers with every
// member and the request is gone.
func TestRestoreInPlaceHasOneOwner(t *testing.T) {
	const key = "ns/demo/20261123T195000.000Z-rev9.db"
	stored := controlPlane(func(h *v1alpha1.HostedControlPlane) {
		h.Annotations = map[string]string{v1alpha1.RestoreEtcdAnnotation: v1alpha1.LatestSnapshot}
	})
	rt := newRestoreTest(t, stored)

	rt.restorer.err = &testProblem{}
	s := rt.pass(t, rt.stored(t), render.Observed{})
	got := rt.stored(t)
	assert.Nil(t, got.Status.Etcd.Restoring, "nothing stops")
	assert.Contains(t, got.Annotations, v1alpha1.RestoreEtcdAnnotation, "the request stays until it can be taken")
	c := conditions.Get(got, v1alpha1.EtcdRestoredCondition)
	require.NotNil(t, c)
	assert.Equal(t, "etcd is not restored in place, and nothing was stopped: no snapshot; it is tried again until the annotation controlplane.cluster.x-k8s.io/restore-etcd is removed", c.Message)
	assert.Equal(t, retryInterval, s.soon)

	rt.restorer.err, rt.restorer.key = nil, key
	stale := rt.stored(t)
	s = rt.pass(t, rt.stored(t), render.Observed{})
	got = rt.stored(t)
	require.NotNil(t, got.Status.Etcd.Restoring)
	restoring := *got.Status.Etcd.Restoring
	assert.Equal(t, key, restoring.Key)
	assert.Equal(t, backup.Request{Snapshot: v1alpha1.LatestSnapshot, Folder: "ns/demo", ID: restoring.ID}, rt.restorer.prepared[len(rt.restorer.prepared)-1])
	assert.Contains(t, got.Annotations, v1alpha1.RestoreEtcdAnnotation, "removed only once the restore is stored")
	assert.Equal(t, v1alpha1.StoppingForRestoreReason, conditions.Get(got, v1alpha1.EtcdRestoredCondition).Reason)
	assert.Positive(t, s.soon)

	// A pass from the copy cached before the restore was stored.
	rt.pass(t, stale, render.Observed{})
	assert.Equal(t, restoring, *rt.stored(t).Status.Etcd.Restoring, "the request is not taken twice")

	// The next pass removes the request, keeps the URL valid for the same
	// restore, and does not end it although etcd answers restored.
	rt.restorer.prepared = nil
	done := render.Observed{Etcd: healthyMembers(3), EtcdRestoreID: restoring.ID}
	rt.pass(t, rt.stored(t), done)
	got = rt.stored(t)
	assert.NotContains(t, got.Annotations, v1alpha1.RestoreEtcdAnnotation)
	assert.Equal(t, []backup.Request{{Snapshot: key, Folder: "ns/demo", ID: restoring.ID}}, rt.restorer.prepared)
	assert.Equal(t, restoring, *got.Status.Etcd.Restoring, "not ended while the request was there")

	rt.pass(t, got, done)
	got = rt.stored(t)
	assert.Nil(t, got.Status.Etcd.Restoring)
	assert.Equal(t, &v1alpha1.EtcdRestoredFrom{Key: key, Revision: 9, ID: restoring.ID}, got.Status.Etcd.RestoredFrom)
	assert.Equal(t, metav1.ConditionTrue, conditions.Get(got, v1alpha1.EtcdRestoredCondition).Status)
}

type testProblem struct{}

func (*testProblem) Error() string { return "no snapshot" }

// A pass that starts from a cached copy older than the control plane's last
// write still ends a restore in place: EtcdRestored turns Ready together with
// status.etcd.restoredFrom. (The patch helper refused the condition as
// changed by another process, wrote restoredFrom, and left EtcdRestored at
// Restoring for good, as an end-to-end run saw.)
func TestRestoreEndsFromAStaleCopy(t *testing.T) {
	const id, key = "20261123T200000Z", "ns/demo/20261123T195000.000Z-rev9.db"
	stored := controlPlane(func(h *v1alpha1.HostedControlPlane) {
		h.Status.Etcd.Restoring = &v1alpha1.EtcdRestoring{ID: id, Key: key}
	})
	setRestoredStep := func(h *v1alpha1.HostedControlPlane, reason, msg string) {
		conditions.Set(h, metav1.Condition{Type: v1alpha1.EtcdRestoredCondition, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
	}
	setRestoredStep(stored, v1alpha1.StoppingForRestoreReason, "stopping the API servers, controller-manager and scheduler (3 pods left)")
	rt := newRestoreTest(t, stored)
	rt.restorer.key = key
	stale := rt.stored(t)

	// The last pass told the members' restore; the cache does not show it yet.
	latest := stale.DeepCopy()
	setRestoredStep(latest, v1alpha1.RestoringReason, "every etcd member restores it as it starts: 0 of 3 ready")
	require.NoError(t, rt.c.Status().Update(t.Context(), latest))

	// This pass, from the stale copy, finds etcd answering with its three
	// members restored.
	rt.pass(t, stale, render.Observed{Etcd: healthyMembers(3), EtcdRestoreID: id})
	got := rt.stored(t)
	assert.Nil(t, got.Status.Etcd.Restoring)
	assert.Equal(t, &v1alpha1.EtcdRestoredFrom{Key: key, Revision: 9, ID: id}, got.Status.Etcd.RestoredFrom)
	restored := conditions.Get(got, v1alpha1.EtcdRestoredCondition)
	require.NotNil(t, restored)
	assert.Equal(t, v1alpha1.ReadyReason, restored.Reason, restored.Message)
	assert.Equal(t, metav1.ConditionTrue, restored.Status)

	// A pass from a copy older still, from before the end, tells a step of
	// the restore after it ended; the next pass says again that it ended.
	setRestoredStep(got, v1alpha1.RestoringReason, "every etcd member restores it as it starts: 2 of 3 ready")
	rt.r.restore(t.Context(), &scope{hcp: got, cluster: rt.cluster, in: rt.in})
	again := conditions.Get(got, v1alpha1.EtcdRestoredCondition)
	assert.Equal(t, restored.Message, again.Message)
	assert.Equal(t, metav1.ConditionTrue, again.Status)
}
