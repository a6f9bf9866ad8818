package envtest

import (
	"fmt"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// readyControlPlane brings a control plane of version up to ControllersReady,
// playing the workload controllers as the other tests do; changes apply to
// the control plane before it is created.
func readyControlPlane(t testing.TB, name, version string, changes ...func(*v1alpha1.HostedControlPlane)) (*clusterv1.Cluster, *v1alpha1.HostedControlPlane) {
	t.Helper()
	ns := namespace(t)
	cluster := newCluster(t, ns, name, 0)
	hcp := newControlPlane(t, cluster, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Version = version
		h.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureClusterIP}
		// Nothing answers there: the probe fails at once, with no name to look up.
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 1}
		for _, change := range changes {
			change(h)
		}
	})
	waitCondition(t, hcp, v1alpha1.KubeconfigReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	// Rolled out again until every certificate is issued and the
	// controllers are ready: a template that changes after its roll-out (a
	// certificate issued late, on a busy machine) leaves its workload's
	// status behind the spec, which holds the next phase back until a real
	// controller would have rolled the change out.
	waitFor(t, name+"'s workloads rolled out, its certificates issued and its controllers ready", func() error {
		ctx := testContext(t)
		if err := RollOutStatefulSet(ctx, env.Client, client.ObjectKey{Namespace: ns, Name: name + "-etcd"}); client.IgnoreNotFound(err) != nil {
			return err
		}
		for _, d := range []string{"-apiserver", "-controller-manager", "-scheduler"} {
			if err := RollOutDeployment(ctx, env.Client, client.ObjectKey{Namespace: ns, Name: name + d}); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		if _, err := conditionIs(t, hcp, v1alpha1.CertificatesReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason); err != nil {
			return err
		}
		_, err := conditionIs(t, hcp, v1alpha1.ControllersReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
		return err
	})
	return cluster, hcp
}

// image is the image of the first container of a workload.
func image(t *testing.T, obj client.Object, ns, name string) string {
	t.Helper()
	require.NoError(t, env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: name}, obj))
	return firstImage(t, obj)
}

// firstImage is the image of the first container of a workload read before.
func firstImage(t *testing.T, obj client.Object) string {
	t.Helper()
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return o.Spec.Template.Spec.Containers[0].Image
	case *appsv1.StatefulSet:
		return o.Spec.Template.Spec.Containers[0].Image
	case *appsv1.DaemonSet:
		return o.Spec.Template.Spec.Containers[0].Image
	}
	t.Fatalf("no image in %T", obj)
	return ""
}

// An upgrade moves etcd, then the API servers, then the controllers, each
// only after the one before has rolled out; status.versions moves only once
// every API server runs the new version.
func TestUpgradeRollsInOrder(t *testing.T) {
	parallel(t)
	_, hcp := readyControlPlane(t, "upgrade", "v1.33.4")
	ns := hcp.Namespace
	runningPod(t, hcp, "upgrade-apiserver-old-a", "v1.33.4")
	runningPod(t, hcp, "upgrade-apiserver-old-b", "v1.33.4")
	versions := func() []clusterv1.StatusVersion {
		require.NoError(t, env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp))
		return hcp.Status.Versions
	}
	waitFor(t, "versions report v1.33.4", func() error {
		if v := versions(); len(v) != 1 || v[0].Version != "v1.33.4" {
			return fmt.Errorf("versions %v", v)
		}
		return nil
	})

	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = "v1.34.0" }))
	waitFor(t, "etcd moves to the etcd of v1.34", func() error {
		if img := image(t, &appsv1.StatefulSet{}, ns, "upgrade-etcd"); img != "registry.k8s.io/etcd:3.6.8-0" {
			return fmt.Errorf("etcd image %s", img)
		}
		return nil
	})
	waitCondition(t, hcp, v1alpha1.EtcdReadyCondition, metav1.ConditionFalse, v1alpha1.ProgressingReason)
	assert.Equal(t, "registry.k8s.io/kube-apiserver:v1.33.4", image(t, &appsv1.Deployment{}, ns, "upgrade-apiserver"), "API servers wait for etcd")

	rollOutStatefulSet(t, ns, "upgrade-etcd")
	waitFor(t, "the API servers move", func() error {
		if img := image(t, &appsv1.Deployment{}, ns, "upgrade-apiserver"); img != "registry.k8s.io/kube-apiserver:v1.34.0" {
			return fmt.Errorf("apiserver image %s", img)
		}
		return nil
	})
	waitCondition(t, hcp, v1alpha1.APIServerReadyCondition, metav1.ConditionFalse, v1alpha1.ProgressingReason)
	for _, name := range []string{"upgrade-controller-manager", "upgrade-scheduler"} {
		assert.Contains(t, image(t, &appsv1.Deployment{}, ns, name), ":v1.33.4", "%s waits for the API servers", name)
	}

	// Mid-rollout one new API server runs beside the old ones.
	runningPod(t, hcp, "upgrade-apiserver-new-a", "v1.34.0")
	time.Sleep(2 * time.Second)
	assert.Equal(t, "v1.33.4", versions()[0].Version, "status.versions stays while an old API server runs")

	rollOutDeployment(t, ns, "upgrade-apiserver")
	waitFor(t, "the controllers move", func() error {
		for _, name := range []string{"upgrade-controller-manager", "upgrade-scheduler"} {
			if img := image(t, &appsv1.Deployment{}, ns, name); img != "registry.k8s.io/kube-"+name[len("upgrade-"):]+":v1.34.0" {
				return fmt.Errorf("%s image %s", name, img)
			}
		}
		return nil
	})
	for _, old := range []string{"upgrade-apiserver-old-a", "upgrade-apiserver-old-b"} {
		require.NoError(t, env.Client.Delete(testContext(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: old}}))
	}
	runningPod(t, hcp, "upgrade-apiserver-new-b", "v1.34.0")
	waitFor(t, "versions report v1.34.0 once every API server runs it", func() error {
		if v := versions(); len(v) != 1 || v[0] != (clusterv1.StatusVersion{Version: "v1.34.0", Replicas: 2}) {
			return fmt.Errorf("versions %v", v)
		}
		return nil
	})
}

// While the Cluster is paused the controller changes nothing; afterwards it
// catches up.
func TestPauseHoldsChanges(t *testing.T) {
	parallel(t)
	cluster, hcp := readyControlPlane(t, "paused", "v1.36.3")
	require.NoError(t, update(t, cluster, func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) }))
	waitCondition(t, hcp, clusterv1.PausedCondition, metav1.ConditionTrue, clusterv1.PausedReason)

	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) { h.Spec.Replicas = ptr.To[int32](4) }))
	time.Sleep(3 * time.Second)
	d := get(t, &appsv1.Deployment{}, hcp.Namespace, "paused-apiserver")
	assert.Equal(t, ptr.To[int32](2), d.Spec.Replicas, "nothing changes while paused")

	require.NoError(t, update(t, cluster, func(c *clusterv1.Cluster) { c.Spec.Paused = nil }))
	waitCondition(t, hcp, clusterv1.PausedCondition, metav1.ConditionFalse, clusterv1.NotPausedReason)
	waitFor(t, "the held change is applied", func() error {
		d := get(t, &appsv1.Deployment{}, hcp.Namespace, "paused-apiserver")
		if *d.Spec.Replicas != 4 {
			return fmt.Errorf("replicas %d", *d.Spec.Replicas)
		}
		return nil
	})
}

// Deleting a control plane removes the certificates and the Secrets
// cert-manager issued, which no owner reference reaches, and then releases
// it. envtest runs no garbage collector: the objects owned by the control
// plane remain here, and the test checks that each is owned, so a real
// cluster's garbage collector removes it.
func TestDeleteRemovesWhatGarbageCollectionCannot(t *testing.T) {
	parallel(t)
	_, hcp := readyControlPlane(t, "deleted", "v1.36.3")
	ns := hcp.Namespace
	require.NoError(t, env.Client.Delete(testContext(t), hcp))
	waitFor(t, "the control plane is gone", func() error {
		err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), &v1alpha1.HostedControlPlane{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %w", err)
	})
	certs := &cmv1.CertificateList{}
	require.NoError(t, env.Client.List(testContext(t), certs, client.InNamespace(ns)))
	assert.Empty(t, certs.Items)
	secrets := &corev1.SecretList{}
	require.NoError(t, env.Client.List(testContext(t), secrets, client.InNamespace(ns)))
	for _, s := range secrets.Items {
		owner := metav1.GetControllerOf(&s)
		if assert.NotNil(t, owner, "secret %s has no owner: nothing would remove it", s.Name) {
			assert.Equal(t, hcp.UID, owner.UID, "secret %s", s.Name)
		}
	}
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &corev1.ServiceList{}} {
		require.NoError(t, env.Client.List(testContext(t), list, client.InNamespace(ns)))
		items, err := metaItems(list)
		require.NoError(t, err)
		assert.NotEmpty(t, items)
		for _, o := range items {
			owner := metav1.GetControllerOf(o)
			if assert.NotNil(t, owner, "%T %s", o, o.GetName()) {
				assert.Equal(t, hcp.UID, owner.UID)
			}
		}
	}
}

// Only etcd's member list changes the members of a running etcd: while no
// member answers (no etcd runs here, only its pods), a new spec.etcd.replicas
// waits, says so, and the StatefulSet keeps its size.
func TestEtcdResizeWaitsForEtcdToAnswer(t *testing.T) {
	parallel(t)
	_, hcp := readyControlPlane(t, "resize", "v1.36.3")
	etcdPods(t, hcp, 3)
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Replicas = ptr.To[int32](5) }))
	c := waitCondition(t, hcp, v1alpha1.EtcdReadyCondition, metav1.ConditionFalse, v1alpha1.EtcdUnhealthyReason)
	assert.Equal(t, "waiting for etcd to answer before changing its members from 3 to 5", c.Message)
	sts := get(t, &appsv1.StatefulSet{}, hcp.Namespace, "resize-etcd")
	assert.Equal(t, ptr.To[int32](3), sts.Spec.Replicas)

	// Back to the three members that run: no consent needed.
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Replicas = ptr.To[int32](3) }))
	waitCondition(t, hcp, v1alpha1.EtcdReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
}
