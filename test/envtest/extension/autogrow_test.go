package extension

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// autoGrowing is a real etcd of one member running with the quota of a 1Gi
// volume, with autoGrow on up to 8Gi, as the controller keeps it: the
// StatefulSet it applied and the member's bound claim of 1Gi in an
// expandable StorageClass.
type autoGrowing struct {
	*etcdCluster
	checker *etcd.Checker
	quota   int64
	sts     *appsv1.StatefulSet
	claim   *corev1.PersistentVolumeClaim
}

func startAutoGrowing(t *testing.T) *autoGrowing {
	t.Helper()
	ns := namespace(t)
	ctx := testContext(t)
	a := &autoGrowing{quota: contract.EtcdQuota(resource.MustParse("1Gi")), checker: etcd.NewChecker()}
	t.Cleanup(a.checker.Close)
	a.etcdCluster = startEtcdOf(t, "demo", ns, 1, 1)
	a.stop(0)
	a.etcdCluster.quota = a.quota
	a.start(0)
	a.waitHealthy()

	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-expandable"}, Provisioner: "example.com/test", AllowVolumeExpansion: ptr.To(true)}
	require.NoError(t, k8s.Create(ctx, class))
	t.Cleanup(func() { _ = k8s.Delete(ctx, class) })
	objs, err := etcd.Component{}.Render(a.input(ctx))
	require.NoError(t, err)
	for _, obj := range objs {
		if s, ok := obj.(*appsv1.StatefulSet); ok {
			a.sts = s
		}
	}
	a.sts.OwnerReferences = nil // no control plane object here
	require.NoError(t, k8s.Create(ctx, a.sts))
	t.Cleanup(func() {
		// No garbage collector runs here to remove the orphan finalizer.
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(a.sts), a.sts); err == nil {
			a.sts.Finalizers = nil
			_ = k8s.Update(ctx, a.sts)
		}
	})
	a.claim = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: "data-demo-etcd-0", Labels: a.sts.Spec.VolumeClaimTemplates[0].Labels,
	}}
	a.claim.Spec = a.sts.Spec.VolumeClaimTemplates[0].Spec
	require.NoError(t, k8s.Create(ctx, a.claim))
	a.claim.Status.Phase = corev1.ClaimBound
	a.claim.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	require.NoError(t, k8s.Status().Update(ctx, a.claim))
	return a
}

// input is what a pass of the controller sees.
func (a *autoGrowing) input(ctx context.Context) render.Input {
	in := a.etcdCluster.input(1, a.observe(ctx, a.checker))
	in.ControlPlane.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("1Gi"))
	in.ControlPlane.Spec.Etcd.StorageClassName = ptr.To(a.namespace + "-expandable")
	in.ControlPlane.Spec.Etcd.AutoGrow, in.ControlPlane.Spec.Etcd.MaxVolumeSize = ptr.To(true), ptr.To(resource.MustParse("8Gi"))
	o := in.Observed
	o.EtcdVolumeCapacity, o.EtcdVolumeRequest = ptr.To(resource.MustParse("1Gi")), ptr.To(resource.MustParse("1Gi"))
	return in.With(o)
}

// preflight runs the preflight of a pass.
func (a *autoGrowing) preflight(ctx context.Context) readiness.Outcome {
	a.t.Helper()
	out, err := etcd.Component{Writer: k8s, Storage: k8s}.Preflight(ctx, k8s, a.input(ctx))
	require.NoError(a.t, err)
	return out
}

// assertGrown asserts that the preflight asked the member's claim for 2Gi
// (1Gi grown by half, rounded up to a GiB) and deleted the StatefulSet with
// its pod orphaned, saying why in out (the alarm first, when alarm).
func (a *autoGrowing) assertGrown(ctx context.Context, out readiness.Outcome, alarm string) {
	t := a.t
	t.Helper()
	assert.Equal(t, v1alpha1.EtcdVolumesGrowingReason, out.Reason)
	assert.Regexp(t, `^re-creating the etcd StatefulSet for volumes of 2Gi \(autoGrow: `+alarm+`member demo-etcd-0's database holds \d+ MiB, 80% or more of its quota of 224 MiB\); its pods keep running$`, out.Message)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(a.claim), a.claim))
	assert.Equal(t, "2Gi", a.claim.Spec.Resources.Requests.Storage().String())
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(a.sts), a.sts))
	assert.NotNil(t, a.sts.DeletionTimestamp)
	assert.True(t, slices.Contains(a.sts.Finalizers, metav1.FinalizerOrphanDependents), "its pods are orphaned")
}

// autoGrow against a real etcd running with the quota of a 1Gi volume: while
// its database is below 80% of the quota the preflight leaves the volume
// alone; once it is above, the preflight grows it.
func TestAutoGrowFollowsTheDatabase(t *testing.T) {
	a := startAutoGrowing(t)
	ctx := testContext(t)
	out := a.preflight(ctx)
	assert.True(t, out.Done, "nothing to grow yet: %s", out.Message)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(a.claim), a.claim))
	assert.Equal(t, "1Gi", a.claim.Spec.Resources.Requests.Storage().String())

	cli := a.client(0)
	value := strings.Repeat("x", 1<<20)
	for i := 0; ; i++ {
		m := a.observe(ctx, a.checker)
		require.Equal(t, a.quota, m.Members[0].Quota, "the member runs the quota of a 1Gi volume")
		if m.Members[0].DBSize*100 >= a.quota*etcd.AutoGrowPercent {
			break
		}
		require.Less(t, i, 250, "the database reaches 80% of its quota")
		_, err := cli.Put(ctx, fmt.Sprintf("/registry/fill/%03d", i), value)
		require.NoError(t, err)
	}
	a.assertGrown(ctx, a.preflight(ctx), "")
}

// A database filled past its quota before autoGrow saw it (etcd raised
// NOSPACE and refuses writes, and let the database a little past its quota
// with the writes it accepted before): the preflight grows the volume all
// the same, and says that etcd refuses writes.
func TestAutoGrowUnderNoSpace(t *testing.T) {
	a := startAutoGrowing(t)
	ctx := testContext(t)
	cli := a.client(0)
	value := strings.Repeat("x", 1<<20)
	var err error
	for i := 0; err == nil; i++ {
		require.Less(t, i, 300, "the quota of 224MiB is reached")
		_, err = cli.Put(ctx, fmt.Sprintf("/registry/fill/%03d", i), value)
	}
	require.ErrorIs(t, err, rpctypes.ErrNoSpace)
	m := a.observe(ctx, a.checker)
	require.True(t, m.NoSpace)
	t.Logf("at NOSPACE: database %d bytes (%d in use), quota %d; problems: %v", m.Members[0].DBSize, m.Members[0].DBSizeInUse, a.quota, m.Problems)
	a.assertGrown(ctx, a.preflight(ctx), "alarm NOSPACE, etcd refuses writes: ")
}
