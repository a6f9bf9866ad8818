package envtest

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Growing spec.etcd.volumeSize of a running etcd whose StorageClass allows
// expansion: every member's claim asks for the new size, the StatefulSet is
// deleted with its pods orphaned (the API server's orphan finalizer shows
// it) and created again with the new claim template, the pods keep their
// uids, and the quota stays with the old volumes until every claim has the
// new capacity, then follows in an update of the re-created StatefulSet.
func TestEtcdVolumesGrowInPlace(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	class := storageClass(t, ns+"-expandable", true)
	hcp, claims := runningEtcd(t, ns, "grows", class, 3)
	sts := get(t, &appsv1.StatefulSet{}, ns, "grows-etcd")
	pods := etcdPodUIDs(t, hcp)

	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("2Gi"))
	}), "admission lets a running etcd's volumes grow")

	for _, claim := range claims {
		waitFor(t, "claim "+claim.Name+" asks for 2Gi", func() error {
			if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(claim), claim); err != nil {
				return err
			}
			if got := claim.Spec.Resources.Requests.Storage(); got.String() != "2Gi" {
				return fmt.Errorf("it asks for %s", got)
			}
			return nil
		})
	}
	// No garbage collector runs here: the test plays it, once the
	// StatefulSet is deleted with its pods orphaned.
	waitFor(t, "the StatefulSet deleted, orphaning its pods", func() error {
		old := &appsv1.StatefulSet{}
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(sts), old); err != nil {
			return err
		}
		if old.DeletionTimestamp == nil || !slices.Contains(old.Finalizers, metav1.FinalizerOrphanDependents) {
			return fmt.Errorf("deletion %v, finalizers %v", old.DeletionTimestamp, old.Finalizers)
		}
		old.Finalizers = nil
		return env.Client.Update(testContext(t), old)
	})
	var recreated *appsv1.StatefulSet
	waitFor(t, "the StatefulSet created again with 2Gi claims", func() error {
		recreated = &appsv1.StatefulSet{}
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(sts), recreated); err != nil {
			return err
		}
		if recreated.UID == sts.UID {
			return fmt.Errorf("still the old StatefulSet")
		}
		return nil
	})
	assert.Equal(t, "2Gi", recreated.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String())
	assert.Contains(t, etcdArgs(recreated), quotaArg("1Gi"), "the quota stays with the volumes, still 1Gi")
	assert.Equal(t, pods, etcdPodUIDs(t, hcp), "the pods keep running")

	rollOutStatefulSet(t, ns, "grows-etcd")
	waitCondition(t, hcp, v1alpha1.EtcdReadyCondition, metav1.ConditionFalse, v1alpha1.EtcdVolumesGrowingReason)
	// What the storage driver says of an expansion is told.
	setStatus(t, claims[0], func(c *corev1.PersistentVolumeClaim) {
		c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{
			Type: corev1.PersistentVolumeClaimControllerResizeError, Status: corev1.ConditionTrue, Message: "the pool is full",
		}}
	})
	waitFor(t, "EtcdReady tells the claim's resize error", func() error {
		cond := waitCondition(t, hcp, v1alpha1.EtcdReadyCondition, metav1.ConditionFalse, v1alpha1.EtcdVolumesGrowingReason)
		if want := "waiting for every etcd member's volume to grow from 1Gi to 2Gi; the quota follows then; " +
			"claim data-grows-etcd-0: ControllerResizeError: the pool is full"; cond.Message != want {
			return fmt.Errorf("message %q", cond.Message)
		}
		return nil
	})

	// The provisioner grows them, one after the other.
	for _, claim := range claims {
		setStatus(t, claim, func(c *corev1.PersistentVolumeClaim) {
			c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
		})
	}
	waitFor(t, "the quota follows the grown volumes", func() error {
		got := &appsv1.StatefulSet{}
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(sts), got); err != nil {
			return err
		}
		if !slices.Contains(etcdArgs(got), quotaArg("2Gi")) {
			return fmt.Errorf("args %v", etcdArgs(got))
		}
		if got.UID != recreated.UID {
			return fmt.Errorf("the StatefulSet was re-created for the quota")
		}
		return nil
	})
	// The status is written at the end of the pass that changed the args.
	waitFor(t, "status.etcd.volumeSize follows the claims", func() error {
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp); err != nil {
			return err
		}
		if got := hcp.Status.Etcd.VolumeSize; got == nil || got.String() != "2Gi" {
			return fmt.Errorf("status.etcd.volumeSize is %v", got)
		}
		return nil
	})
	assert.Equal(t, pods, etcdPodUIDs(t, hcp), "no pod was deleted")
}

// Where the StorageClass does not allow expansion, EtcdReady says so and
// nothing changes; the spec can then be put back, and the condition goes.
func TestEtcdVolumeGrowthRefusedByStorageClass(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	class := storageClass(t, ns+"-fixed", false)
	hcp, claims := runningEtcd(t, ns, "fixed", class, 1)
	sts := get(t, &appsv1.StatefulSet{}, ns, "fixed-etcd")

	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("2Gi"))
	}))
	cond := waitCondition(t, hcp, v1alpha1.EtcdReadyCondition, metav1.ConditionFalse, v1alpha1.EtcdVolumeNotExpandableReason)
	assert.Equal(t, "cannot grow the etcd volumes from 1Gi to 2Gi: StorageClass "+class+
		" does not allow volume expansion (allowVolumeExpansion is not true); set spec.etcd.volumeSize back to 1Gi", cond.Message)
	require.NoError(t, env.Client.Get(testContext(t), client.ObjectKeyFromObject(claims[0]), claims[0]))
	assert.Equal(t, "1Gi", claims[0].Spec.Resources.Requests.Storage().String(), "the claim is left alone")
	got := get(t, &appsv1.StatefulSet{}, ns, "fixed-etcd")
	assert.Equal(t, sts.UID, got.UID, "the StatefulSet is left alone")
	assert.Nil(t, got.DeletionTimestamp)

	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("1Gi"))
	}), "admission lets the spec go back to the volumes")
	waitFor(t, "EtcdReady no longer says the volumes cannot grow", func() error {
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp); err != nil {
			return err
		}
		for _, c := range hcp.Status.Conditions {
			if c.Type == v1alpha1.EtcdReadyCondition && c.Reason == v1alpha1.EtcdVolumeNotExpandableReason {
				return fmt.Errorf("still %s", c.Message)
			}
		}
		return nil
	})
	err := update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("1023Mi"))
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.etcd.volumeSize: Forbidden: cannot shrink etcd volumes from 1Gi to 1023Mi: volumes only grow; set 1Gi or more")
}

// storageClass creates a StorageClass that allows expansion or not, deleted
// with the test.
func storageClass(t *testing.T, name string, expandable bool) string {
	t.Helper()
	class := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: name},
		Provisioner:          "example.com/test",
		AllowVolumeExpansion: ptr.To(expandable),
	}
	require.NoError(t, env.Client.Create(testContext(t), class))
	t.Cleanup(func() { _ = env.Client.Delete(testContext(t), class) })
	return name
}

// runningEtcd creates a control plane with members etcd members on 1Gi
// volumes of class, and plays the StatefulSet controller and the
// provisioner: their pods run and their claims are bound, until the status
// reports the volumes.
func runningEtcd(t *testing.T, ns, name, class string, members int32) (*v1alpha1.HostedControlPlane, []*corev1.PersistentVolumeClaim) {
	t.Helper()
	cluster := newCluster(t, ns, name, 0)
	hcp := newControlPlane(t, cluster, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureClusterIP}
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: name + ".example.com", Port: 443}
		h.Spec.Etcd.Replicas = ptr.To(members)
		h.Spec.Etcd.StorageClassName = ptr.To(class)
		h.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("1Gi"))
	})
	sts := get(t, &appsv1.StatefulSet{}, ns, name+"-etcd")
	etcdPods(t, hcp, int(members))
	var claims []*corev1.PersistentVolumeClaim
	for i := range members {
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("data-%s-%d", sts.Name, i), Labels: sts.Spec.VolumeClaimTemplates[0].Labels,
		}}
		claim.Spec = sts.Spec.VolumeClaimTemplates[0].Spec
		require.NoError(t, env.Client.Create(testContext(t), claim))
		setStatus(t, claim, func(c *corev1.PersistentVolumeClaim) {
			c.Status.Phase = corev1.ClaimBound
			c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
		})
		claims = append(claims, claim)
	}
	waitFor(t, "status.etcd.volumeSize", func() error {
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp); err != nil {
			return err
		}
		if hcp.Status.Etcd.VolumeSize == nil {
			return fmt.Errorf("not reported yet")
		}
		return nil
	})
	return hcp, claims
}

// etcdPodUIDs are the uids of the control plane's etcd pods, by name.
func etcdPodUIDs(t *testing.T, hcp *v1alpha1.HostedControlPlane) map[string]types.UID {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, env.Client.List(testContext(t), pods, client.InNamespace(hcp.Namespace),
		client.MatchingLabels{contract.ControlPlaneLabel: hcp.Name, contract.ComponentLabel: contract.EtcdComponent}))
	uids := map[string]types.UID{}
	for _, p := range pods.Items {
		uids[p.Name] = p.UID
	}
	return uids
}

func etcdArgs(sts *appsv1.StatefulSet) []string { return sts.Spec.Template.Spec.Containers[0].Args }

func quotaArg(volume string) string {
	return "--" + contract.EtcdQuotaFlag + "=" + strconv.FormatInt(contract.EtcdQuota(resource.MustParse(volume)), 10)
}
