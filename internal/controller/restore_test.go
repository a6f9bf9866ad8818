package controller

import (
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
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
)

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
	c := fake.NewClientBuilder().WithScheme(observedKinds()).WithObjects(stored).WithStatusSubresource(stored).Build()
	ctx := t.Context()
	stale := &v1alpha1.HostedControlPlane{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(stored), stale))

	// The last pass told the members' restore; the cache does not show it yet.
	latest := stale.DeepCopy()
	setRestoredStep(latest, v1alpha1.RestoringReason, "every etcd member restores it as it starts: 0 of 3 ready")
	require.NoError(t, c.Status().Update(ctx, latest))

	// This pass, from the stale copy, finds etcd answering with its three
	// members restored.
	r := &Reconciler{recorder: events.NewFakeRecorder(10)}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo"}}
	cluster.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
	in, err := render.NewInput(stale, cluster, render.DefaultSettings())
	require.NoError(t, err)
	members := &render.EtcdMembership{Answered: true, Existing: true}
	for _, name := range []string{"demo-etcd-0", "demo-etcd-1", "demo-etcd-2"} {
		members.Members = append(members.Members, render.EtcdMember{Name: name, ID: uint64(len(members.Members) + 1), Healthy: true})
	}
	helper, err := patch.NewHelper(stale, c)
	require.NoError(t, err)
	r.recordRestore(&scope{hcp: stale, in: in.With(render.Observed{Etcd: members, EtcdRestoreID: id})})
	require.NoError(t, helper.Patch(ctx, stale, patch.WithOwnedConditions{Conditions: ownedConditions()}))

	got := &v1alpha1.HostedControlPlane{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(stored), got))
	assert.Nil(t, got.Status.Etcd.Restoring)
	assert.Equal(t, &v1alpha1.EtcdRestoredFrom{Key: key, Revision: 9, ID: id}, got.Status.Etcd.RestoredFrom)
	restored := conditions.Get(got, v1alpha1.EtcdRestoredCondition)
	require.NotNil(t, restored)
	assert.Equal(t, v1alpha1.ReadyReason, restored.Reason, restored.Message)
	assert.Equal(t, metav1.ConditionTrue, restored.Status)

	// A pass from a copy older still, from before the end, tells a step of
	// the restore after it ended; the next pass says again that it ended.
	setRestoredStep(got, v1alpha1.RestoringReason, "every etcd member restores it as it starts: 2 of 3 ready")
	r.recordRestore(&scope{hcp: got, in: in})
	again := conditions.Get(got, v1alpha1.EtcdRestoredCondition)
	assert.Equal(t, restored.Message, again.Message)
	assert.Equal(t, metav1.ConditionTrue, again.Status)

	// A new request whose snapshot cannot be had: what the backup
	// controller says of it stands while the request does.
	got.Annotations = map[string]string{v1alpha1.RestoreEtcdAnnotation: "ns/demo/missing.db"}
	setRestoredStep(got, "SnapshotNotFound", "etcd is not restored in place, and nothing was stopped: snapshot ns/demo/missing.db does not exist")
	r.recordRestore(&scope{hcp: got, in: in})
	assert.Equal(t, "SnapshotNotFound", conditions.Get(got, v1alpha1.EtcdRestoredCondition).Reason)
	delete(got.Annotations, v1alpha1.RestoreEtcdAnnotation)
	r.recordRestore(&scope{hcp: got, in: in})
	assert.Equal(t, restored.Message, conditions.Get(got, v1alpha1.EtcdRestoredCondition).Message, "the request withdrawn, the last restore is told again")
}
