package envtest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// status.etcd reports what exists: no volume size before a volume does,
// then the size the volumes were given, whatever the spec asks for; and the
// members etcd is founded with, while no etcd answers (only its pods exist
// here), none of them reported healthy.
func TestStatusReportsObservedEtcd(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	cluster := newCluster(t, ns, "observed", 0)
	hcp := newControlPlane(t, cluster, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureClusterIP}
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 1}
		h.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("2Gi"))
	})
	sts := get(t, &appsv1.StatefulSet{}, ns, "observed-etcd")
	// No StatefulSet controller runs here: no pod, no claim.
	waitCondition(t, hcp, v1alpha1.EtcdReadyCondition, metav1.ConditionFalse, v1alpha1.ProgressingReason)
	require.NoError(t, env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp))
	assert.Nil(t, hcp.Status.Etcd.VolumeSize, "no volume exists yet")

	// The test plays the StatefulSet controller and the volume provisioner:
	// one member's claim is bound with what the provisioner gave (more than
	// asked, as provisioners round up), the other two are still pending.
	labels := sts.Spec.Template.Labels
	for i, phase := range []corev1.PersistentVolumeClaimPhase{corev1.ClaimBound, corev1.ClaimPending, corev1.ClaimPending} {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("data-observed-etcd-%d", i), Labels: labels,
		}}
		pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
		require.NoError(t, env.Client.Create(testContext(t), pvc))
		setStatus(t, pvc, func(p *corev1.PersistentVolumeClaim) {
			p.Status.Phase = phase
			if phase == corev1.ClaimBound {
				p.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("3Gi")}
			}
		})
	}
	etcdPods(t, hcp, 3)
	waitFor(t, "status.etcd from the bound claim", func() error {
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp); err != nil {
			return err
		}
		if st := hcp.Status.Etcd; len(st.Members) != 3 || st.VolumeSize == nil {
			return fmt.Errorf("status.etcd %+v", st)
		}
		return nil
	})
	assert.Equal(t, []string{"observed-etcd-0", "observed-etcd-1", "observed-etcd-2"}, hcp.Status.Etcd.Members)
	assert.Empty(t, hcp.Status.Etcd.MemberStatuses, "no etcd answered")
	assert.Equal(t, "3Gi", hcp.Status.Etcd.VolumeSize.String(), "what the volume was given, not the spec's 2Gi")
}
