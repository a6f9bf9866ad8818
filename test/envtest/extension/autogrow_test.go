package extension

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// autoGrow against a real etcd running with the quota of a 1Gi volume: while
// its database is below 80% of the quota the preflight leaves the volume
// alone; once it is above, the preflight asks the member's claim for 2Gi
// (1Gi grown by half, rounded up to a GiB) and deletes the StatefulSet with
// its pod orphaned, saying why.
func TestAutoGrowFollowsTheDatabase(t *testing.T) {
	ns := namespace(t)
	ctx := testContext(t)
	quota := contract.EtcdQuota(resource.MustParse("1Gi"))
	c := startEtcdOf(t, "demo", ns, 1, 1)
	c.stop(0)
	c.quota = quota
	c.start(0)
	c.waitHealthy()
	checker := etcd.NewChecker()
	t.Cleanup(checker.Close)

	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-expandable"}, Provisioner: "example.com/test", AllowVolumeExpansion: ptr.To(true)}
	require.NoError(t, k8s.Create(ctx, class))
	t.Cleanup(func() { _ = k8s.Delete(ctx, class) })
	input := func() render.Input {
		in := c.input(1, c.observe(ctx, checker))
		in.ControlPlane.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("1Gi"))
		in.ControlPlane.Spec.Etcd.StorageClassName = ptr.To(class.Name)
		in.ControlPlane.Spec.Etcd.AutoGrow, in.ControlPlane.Spec.Etcd.MaxVolumeSize = ptr.To(true), ptr.To(resource.MustParse("8Gi"))
		o := in.Observed
		o.EtcdVolumeCapacity, o.EtcdVolumeRequest = ptr.To(resource.MustParse("1Gi")), ptr.To(resource.MustParse("1Gi"))
		return in.With(o)
	}
	// What the controller applied, and the member's bound claim.
	objs, err := etcd.Component{}.Render(input())
	require.NoError(t, err)
	var sts *appsv1.StatefulSet
	for _, obj := range objs {
		if s, ok := obj.(*appsv1.StatefulSet); ok {
			sts = s
		}
	}
	sts.OwnerReferences = nil // no control plane object here
	require.NoError(t, k8s.Create(ctx, sts))
	t.Cleanup(func() {
		// No garbage collector runs here to remove the orphan finalizer.
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), sts); err == nil {
			sts.Finalizers = nil
			_ = k8s.Update(ctx, sts)
		}
	})
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: "data-demo-etcd-0", Labels: sts.Spec.VolumeClaimTemplates[0].Labels,
	}}
	claim.Spec = sts.Spec.VolumeClaimTemplates[0].Spec
	require.NoError(t, k8s.Create(ctx, claim))
	claim.Status.Phase = corev1.ClaimBound
	claim.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	require.NoError(t, k8s.Status().Update(ctx, claim))
	preflight := etcd.Component{Writer: k8s, Storage: k8s}.Preflight

	out, err := preflight(ctx, k8s, input())
	require.NoError(t, err)
	assert.True(t, out.Done, "nothing to grow yet: %s", out.Message)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
	assert.Equal(t, "1Gi", claim.Spec.Resources.Requests.Storage().String())

	cli := c.client(0)
	value := strings.Repeat("x", 1<<20)
	for i := 0; ; i++ {
		m := c.observe(ctx, checker)
		require.Equal(t, quota, m.Members[0].Quota, "the member runs the quota of a 1Gi volume")
		if m.Members[0].DBSize*100 >= quota*etcd.AutoGrowPercent {
			break
		}
		require.Less(t, i, 250, "the database reaches 80% of its quota")
		_, err := cli.Put(ctx, fmt.Sprintf("/registry/fill/%03d", i), value)
		require.NoError(t, err)
	}

	out, err = preflight(ctx, k8s, input())
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.EtcdVolumesGrowingReason, out.Reason)
	assert.Regexp(t, `^re-creating the etcd StatefulSet for volumes of 2Gi \(autoGrow: member demo-etcd-0's database holds \d+ MiB, 80% or more of its quota of 224 MiB\); its pods keep running$`, out.Message)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
	assert.Equal(t, "2Gi", claim.Spec.Resources.Requests.Storage().String())
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(sts), sts))
	assert.NotNil(t, sts.DeletionTimestamp)
	assert.True(t, slices.Contains(sts.Finalizers, metav1.FinalizerOrphanDependents), "its pods are orphaned")
}
