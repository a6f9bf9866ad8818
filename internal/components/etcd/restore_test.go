package etcd

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// A restore in place stops every member, keeping their volumes, before
// any starts again; they start together, founding a new cluster from the
// snapshot, and the restore ends once etcd answers with all of them.
func TestRestoreInPlaceSteps(t *testing.T) {
	const id = "20261123T200000Z"
	restoring := func(stale int, secretID string, m *render.EtcdMembership) render.Input {
		in := input(t, v1alpha1.EtcdSpec{Replicas: ptr.To[int32](3)})
		in.ControlPlane.Status.Etcd.Restoring = &v1alpha1.EtcdRestoring{ID: id, Key: "default/demo/20261123T195000.000Z-rev99.db"}
		o := render.Observed{Etcd: m, EtcdStalePods: stale, EtcdRestoreID: secretID}
		return in.With(o)
	}
	for name, tc := range map[string]struct {
		in       render.Input
		replicas int32
		state    string
		restored bool
	}{
		"the members from before still run":        {in: restoring(3, id, membership(3)), replicas: 0, state: "new"},
		"the restore Secret names another restore": {in: restoring(0, "20260101T000000Z", membership(3)), replicas: 0, state: "new"},
		"all stopped: they start and restore":      {in: restoring(0, id, nil), replicas: 3, state: "new"},
		"two of three answer": {in: restoring(0, id, func() *render.EtcdMembership {
			m := membership(3)
			m.Members[2].Healthy = false
			return m
		}()), replicas: 3, state: "new"},
		"every member answers": {in: restoring(0, id, membership(3)), replicas: 3, state: "existing", restored: true},
	} {
		t.Run(name, func(t *testing.T) {
			sts := statefulSet(tc.in)
			assert.Equal(t, tc.replicas, *sts.Spec.Replicas)
			assert.Equal(t, appsv1.RetainPersistentVolumeClaimRetentionPolicyType, sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled,
				"the volumes stay while no member runs")
			assert.Equal(t, tc.in.EtcdRestoreID, sts.Spec.Template.Annotations[contract.EtcdRestoreIDAnnotation])
			assert.Equal(t, "etcd-restore", sts.Spec.Template.Spec.InitContainers[0].Name)
			assert.Equal(t, tc.state, membersConfigMap(tc.in).Data[initialClusterStateEnv])
			assert.Equal(t, tc.restored, Restored(tc.in))
		})
	}

	// Once it ended, the members keep the template they restored with,
	// and volumes go with their members again.
	done := input(t, v1alpha1.EtcdSpec{Replicas: ptr.To[int32](3)}).With(render.Observed{Etcd: membership(3), EtcdRestoreID: id})
	sts := statefulSet(done)
	assert.Equal(t, int32(3), *sts.Spec.Replicas)
	assert.Equal(t, appsv1.DeletePersistentVolumeClaimRetentionPolicyType, sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled)
	assert.Equal(t, id, sts.Spec.Template.Annotations[contract.EtcdRestoreIDAnnotation])
	assert.Equal(t, "existing", membersConfigMap(done).Data[initialClusterStateEnv])
}

func TestStalePods(t *testing.T) {
	pod := func(id string) corev1.Pod {
		p := corev1.Pod{}
		if id != "" {
			p.Annotations = map[string]string{contract.EtcdRestoreIDAnnotation: id}
		}
		return p
	}
	assert.Equal(t, 2, StalePods([]corev1.Pod{pod(""), pod("20260101T000000Z"), pod("20261123T200000Z")}, "20261123T200000Z"))
}
