package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// observedKinds are the kinds a pass observes.
func observedKinds() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, clusterv1.AddToScheme, gatewayv1.Install} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

func observed(t *testing.T, hcp *v1alpha1.HostedControlPlane, objs ...client.Object) *scope {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(observedKinds()).WithObjects(objs...).Build()
	return observedWith(t, c, hcp)
}

func observedWith(t *testing.T, c client.Client, hcp *v1alpha1.HostedControlPlane) *scope {
	t.Helper()
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo"}}
	cluster.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
	r := &Reconciler{client: c, apiReader: c, settings: render.DefaultSettings(), recorder: events.NewFakeRecorder(10)}
	s := &scope{hcp: hcp, cluster: cluster}
	r.observe(t.Context(), s)
	return s
}

func controlPlane(change func(*v1alpha1.HostedControlPlane)) *v1alpha1.HostedControlPlane {
	hcp := &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo"}}
	hcp.Spec.Version = "v1.36.3"
	if change != nil {
		change(hcp)
	}
	return hcp
}

func secret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{contract.ControlPlaneLabel: "demo"}},
		Data:       data,
	}
}

// The Input holds what the pass observed: the endpoint the load balancer
// gives (completing what the user set), the konnectivity port of the same
// Service, the admin certificate, the cluster CA, and the digests of the
// Secrets the pods mount: as cert-manager issued them, or, for those the
// controller writes itself, as they are rendered, whatever the cluster holds.
func TestObserveBuildsTheInput(t *testing.T) {
	hcp := controlPlane(func(h *v1alpha1.HostedControlPlane) { h.Spec.ControlPlaneEndpoint.Host = "api.example.com" })
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-apiserver"}}
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.Ports = []corev1.ServicePort{{Name: "https", Port: 6443}, {Name: "konnectivity", Port: 8132}}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	issued := map[string][]byte{"tls.crt": []byte("cert"), "tls.key": []byte("key"), "ca.crt": []byte("ca")}
	s := observed(t, hcp, svc,
		secret("demo-apiserver", issued), secret("demo-admin", issued), secret("demo-ca", issued),
		secret("demo-egress-selector", map[string][]byte{"egress-selector.yaml": []byte("edited")}))

	assert.Equal(t, map[string]bool{}, s.done)
	assert.True(t, s.held[v1alpha1.ClusterReadyCondition].Done)
	assert.NotContains(t, s.held, v1alpha1.ExposureReadyCondition)
	in := s.in
	assert.Equal(t, clusterv1.APIEndpoint{Host: "api.example.com", Port: 6443}, in.Endpoint)
	assert.Equal(t, int32(8132), in.KonnectivityPort)
	assert.Equal(t, render.Credentials{Cert: []byte("cert"), Key: []byte("key"), CA: []byte("ca")}, in.Admin)
	assert.Equal(t, []byte("cert"), in.ClusterCA)
	assert.Equal(t, contract.DataDigest(issued), in.SecretDigests["demo-apiserver"])
	rendered, err := components.RenderedSecretDigests(in)
	require.NoError(t, err)
	for name, digest := range rendered {
		assert.Equal(t, digest, in.SecretDigests[name], name)
	}
	assert.Contains(t, rendered, "demo-egress-selector")
	assert.NotNil(t, s.facts)
}

// What cannot be observed yet holds the phase that needs it, with the
// outcome that phase would say; an exposure without an address only waits.
func TestObserveHoldsWhatItCannotSee(t *testing.T) {
	s := observed(t, controlPlane(func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Gateway = &v1alpha1.GatewayReference{Name: "capi", Namespace: "capi-system"}
	}))
	assert.Equal(t, v1alpha1.GatewayNotFoundReason, s.held[v1alpha1.ExposureReadyCondition].Reason)
	assert.True(t, s.held[v1alpha1.ExposureReadyCondition].Warn)

	s = observed(t, controlPlane(nil))
	assert.NotContains(t, s.held, v1alpha1.ExposureReadyCondition, "no Service yet: the exposure renders it and waits")
	assert.Equal(t, clusterv1.APIEndpoint{}, s.in.Endpoint)

	s = observed(t, controlPlane(func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = "latest" }))
	assert.Equal(t, v1alpha1.ClusterNetworkMissingReason, s.held[v1alpha1.ClusterReadyCondition].Reason)
	assert.Nil(t, s.facts, "no Input, nothing observed")
}

// The restore Secret's ID counts only once the status names its restore,
// so that no pod rolls for a restore the backup controller has not recorded
// yet.
func TestRestoreIDCountsOnceRecorded(t *testing.T) {
	cp := &v1alpha1.HostedControlPlane{}
	assert.Empty(t, restoreID(cp, "20261123T200000Z"), "written, not recorded yet")
	cp.Status.Etcd.Restoring = &v1alpha1.EtcdRestoring{ID: "20261123T200000Z", Key: "ns/demo/20261123T195000.000Z-rev9.db"}
	assert.Equal(t, "20261123T200000Z", restoreID(cp, "20261123T200000Z"), "under way")
	assert.Empty(t, restoreID(cp, "20261123T210000Z"), "written for a later request, not recorded yet")
	cp.Status.Etcd.Restoring = nil
	cp.Status.Etcd.RestoredFrom = &v1alpha1.EtcdRestoredFrom{Key: "ns/demo/20261123T195000.000Z-rev9.db", Revision: 9, ID: "20261123T200000Z"}
	assert.Equal(t, "20261123T200000Z", restoreID(cp, "20261123T200000Z"), "done: the members keep their template")
	assert.Empty(t, restoreID(cp, ""))
}
