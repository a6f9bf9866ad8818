package envtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// withControllerSettings restarts the shared controller with more settings
// (environment variables) until the test ends, as a platform team changing
// the controller's Deployment would.
func withControllerSettings(t *testing.T, settings ...string) {
	t.Helper()
	stopController(t)
	restarted, err := env.StartController(binDir, settings...)
	if err != nil {
		// Leave the suite a controller, whatever this test does next.
		controller, _ = env.StartController(binDir)
		t.Fatalf("start the controller with %v: %v", settings, err)
	}
	controller = restarted
	t.Cleanup(func() {
		stopController(t)
		var err error
		controller, err = env.StartController(binDir)
		require.NoError(t, err, "start the controller again with its usual settings")
	})
}

// stopController stops the shared controller; one that outlasts 30s after
// SIGTERM (its cluster cache, under load) is killed and told, not failed:
// how controller-runtime stops is not what these tests prove, and the
// controller must start again either way.
func stopController(t *testing.T) {
	t.Helper()
	if err := controller.Stop(30 * time.Second); err != nil {
		t.Logf("the controller was killed: %.300s", err)
	}
}

// The platform narrows the registries images may come from after a control
// plane pulled from another one: that control plane keeps running as it is
// (nothing rolls), says so in ImagesAllowed and a Warning event, and still
// takes changes that choose no other refused image. A new control plane or
// template, or a change to another refused image, is refused by admission
// with the field and the registries allowed.
func TestAllowedImageRegistries(t *testing.T) {
	serial(t)
	ns := namespace(t)
	hcp := newControlPlane(t, newCluster(t, ns, "img", 0), func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Etcd.Image = &v1alpha1.ImageSpec{Registry: ptr.To("old.example.com")}
		h.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureClusterIP}
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "img.example.com", Port: 6443}
	})
	waitCondition(t, hcp, v1alpha1.ImagesAllowedCondition, metav1.ConditionTrue, v1alpha1.AllowedRegistriesReason)
	// Once every certificate is issued, the pod templates that mount them
	// no longer change.
	waitCondition(t, hcp, v1alpha1.KubeconfigReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	before := get(t, &appsv1.StatefulSet{}, ns, "img-etcd")
	require.Equal(t, "old.example.com/etcd:3.6.8-0", before.Spec.Template.Spec.Containers[0].Image)

	withControllerSettings(t, "ALLOWED_IMAGE_REGISTRIES=registry.example.com/mirror,registry.k8s.io/kube-proxy")
	c := waitCondition(t, hcp, v1alpha1.ImagesAllowedCondition, metav1.ConditionFalse, v1alpha1.ImageNotAllowedReason)
	assert.Equal(t, "spec.etcd.image pulls old.example.com/etcd, which is not from a registry this platform allows (registry.example.com/mirror, registry.k8s.io/kube-proxy); "+
		"use an image from one of them; it was accepted before and keeps running, but a change to another image from a registry not allowed is refused", c.Message)
	hasEvent(t, hcp, v1alpha1.ImageNotAllowedReason)
	after := get(t, &appsv1.StatefulSet{}, ns, "img-etcd")
	assert.Equal(t, before.Generation, after.Generation, "etcd does not roll")
	assert.Equal(t, before.Spec.Template.Spec.Containers[0].Image, after.Spec.Template.Spec.Containers[0].Image)

	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) { h.Spec.Replicas = ptr.To[int32](3) }),
		"a change that chooses no other refused image is taken")
	err := update(t, hcp, func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Image.Registry = ptr.To("other.example.com") })
	require.ErrorContains(t, err, "spec.etcd.image: Forbidden: pulls other.example.com/etcd, which is not from a registry this platform allows "+
		"(registry.example.com/mirror, registry.k8s.io/kube-proxy); use an image from one of them")
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Etcd.Image.Registry = ptr.To("registry.example.com/mirror")
	}), "moving to an allowed registry")
	waitCondition(t, hcp, v1alpha1.ImagesAllowedCondition, metav1.ConditionTrue, v1alpha1.AllowedRegistriesReason)

	_, err = create(t, ns, `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlane
metadata: {name: fresh}
spec:
  version: v1.36.3
  coredns: {image: {repository: coredns-fork}}`)
	require.ErrorContains(t, err, "spec.coredns.image: Forbidden: pulls registry.k8s.io/coredns-fork (image.registry is unset: the default registry), "+
		"which is not from a registry this platform allows")
	_, err = create(t, ns, `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlaneTemplate
metadata: {name: fresh}
spec:
  template:
    spec:
      deployment: {apiServer: {konnectivity: {image: {registry: registry.example.com.evil.com/mirror}}}}`)
	require.ErrorContains(t, err, "spec.template.spec.deployment.apiServer.konnectivity.image: Forbidden: pulls registry.example.com.evil.com/mirror/kas-network-proxy/proxy-server")
	_, err = create(t, ns, `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlane
metadata: {name: allowed}
spec:
  version: v1.36.3
  kubeProxy: {image: {tag: v1.36.2}}
  etcd: {image: {registry: registry.example.com/mirror/k8s}}`)
	require.NoError(t, err, "an allowed repository of the default registry with another tag, and a path within an allowed registry")
}
