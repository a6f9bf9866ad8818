package controller

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/encryption"
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
// Secrets the pods mount: as cert-manager issued them, only their CA for
// those whose certificate the pods read again when renewed, or, for those
// the controller writes itself, as they are rendered, whatever the cluster
// holds.
func TestObserveBuildsTheInput(t *testing.T) {
	hcp := controlPlane(func(h *v1alpha1.HostedControlPlane) { h.Spec.ControlPlaneEndpoint.Host = "api.example.com" })
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-apiserver"}}
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.Ports = []corev1.ServicePort{{Name: "https", Port: 6443}, {Name: "konnectivity", Port: 8132}}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	issued := map[string][]byte{"tls.crt": []byte("cert"), "tls.key": []byte("key"), "ca.crt": []byte("ca")}
	s := observed(t, hcp, svc,
		secret("demo-apiserver", issued), secret("demo-admin", issued), secret("demo-ca", issued),
		secret("demo-konnectivity-server", issued),
		secret("demo-egress-selector", map[string][]byte{"egress-selector.yaml": []byte("edited")}))

	assert.Equal(t, map[string]bool{}, s.done)
	assert.True(t, s.held[v1alpha1.ClusterReadyCondition].Done)
	assert.NotContains(t, s.held, v1alpha1.ExposureReadyCondition)
	in := s.in
	assert.Equal(t, clusterv1.APIEndpoint{Host: "api.example.com", Port: 6443}, in.Endpoint)
	assert.Equal(t, int32(8132), in.KonnectivityPort)
	assert.Equal(t, render.Credentials{Cert: []byte("cert"), Key: []byte("key"), CA: []byte("ca")}, in.Admin)
	assert.Equal(t, []byte("cert"), in.ClusterCA)
	assert.Equal(t, contract.DataDigest(map[string][]byte{"ca.crt": []byte("ca")}), in.SecretDigests["demo-apiserver"],
		"the API server reads its serving certificate again when renewed, its CA at start")
	assert.Equal(t, contract.DataDigest(issued), in.SecretDigests["demo-konnectivity-server"],
		"the konnectivity server reads its serving certificate at start")
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

// A renewed leaf rolls only the pods that read it at start: a renewal keeps
// the CA (ca.crt) and changes the certificate and key, which etcd, the API
// server, the controllers and the konnectivity server's client read again;
// the konnectivity server's serving certificate is read at start, the
// service account key's certificate (renewed with the key kept) by nobody;
// a new service account key or CA rolls every pod that reads it.
func TestRenewalRollsOnlyWhatReadsAtStart(t *testing.T) {
	for _, gateway := range []bool{false, true} {
		t.Run(map[bool]string{false: "load balancer", true: "gateway"}[gateway], func(t *testing.T) { renewalRolls(t, gateway) })
	}
}

// renewalRolls checks which pods renewals roll, served through a load
// balancer or a gateway (whose tunnel's server mounts a certificate too).
func renewalRolls(t *testing.T, gateway bool) {
	issued := func(cert, ca string) map[string][]byte {
		return map[string][]byte{"tls.crt": []byte(cert), "tls.key": []byte(cert + "-key"), "ca.crt": []byte(ca)}
	}
	names := []string{
		"demo-admin", "demo-ca", "demo-sa", "demo-apiserver", "demo-apiserver-kubelet-client", "demo-apiserver-etcd-client",
		"demo-front-proxy-client", "demo-etcd-server", "demo-etcd-peer", "demo-controller-manager", "demo-scheduler",
		"demo-konnectivity-server", "demo-konnectivity-client", "demo-kas-tunnel",
	}
	config, err := encryption.NewRandomConfig(metav1.Now().Time)
	require.NoError(t, err)
	templates := func(change map[string]map[string][]byte) map[string]string {
		objs := []client.Object{secret("demo-encryption", map[string][]byte{contract.EncryptionConfigKey: config})}
		for _, name := range names {
			data := issued("first", "ca")
			if c, ok := change[name]; ok {
				data = c
			}
			objs = append(objs, secret(name, data))
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-apiserver"}}
		svc.Spec.Type = corev1.ServiceTypeLoadBalancer
		svc.Spec.Ports = []corev1.ServicePort{{Name: "https", Port: 6443}, {Name: "konnectivity", Port: 8132}}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
		hcp := controlPlane(nil)
		if gateway {
			hcp.Spec.Gateway = &v1alpha1.GatewayReference{Name: "capi", Namespace: "capi-system"}
			objs = append(objs, &gatewayv1.Gateway{
				ObjectMeta: metav1.ObjectMeta{Namespace: "capi-system", Name: "capi"},
				Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{{
					Name: "tls", Protocol: gatewayv1.TLSProtocolType, Port: 443, Hostname: ptr.To(gatewayv1.Hostname("*.hcp.test")),
					TLS: &gatewayv1.ListenerTLSConfig{Mode: ptr.To(gatewayv1.TLSModePassthrough)},
				}}},
			})
		}
		s := observed(t, hcp, append(objs, svc)...)
		require.Equal(t, gateway, s.in.Listener != nil, "served through the gateway")
		hashes := map[string]string{}
		for _, c := range components.Management(etcd.Component{}) {
			rendered, err := c.Render(s.in)
			require.NoError(t, err, c.Name())
			for _, obj := range rendered {
				switch o := obj.(type) {
				case *appsv1.Deployment:
					hashes[o.Name] = o.Spec.Template.Annotations[render.SecretsHashAnnotation]
				case *appsv1.StatefulSet:
					hashes[o.Name] = o.Spec.Template.Annotations[render.SecretsHashAnnotation]
				}
			}
		}
		return hashes
	}
	before := templates(nil)
	require.Len(t, before, 4, "etcd, the API servers, the controller manager and the scheduler: %v", before)
	rolled := func(change map[string]map[string][]byte) []string {
		var names []string
		for name, hash := range templates(change) {
			if hash != before[name] {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names
	}
	for secretName, want := range map[string][]string{
		"demo-apiserver":                nil,
		"demo-apiserver-kubelet-client": nil,
		"demo-apiserver-etcd-client":    nil,
		"demo-front-proxy-client":       nil,
		"demo-etcd-server":              nil,
		"demo-etcd-peer":                nil,
		"demo-controller-manager":       nil,
		"demo-scheduler":                nil,
		"demo-konnectivity-client":      nil,
		"demo-kas-tunnel":               nil,
		"demo-konnectivity-server":      {"demo-apiserver"},
		"demo-ca":                       {"demo-controller-manager"},
	} {
		assert.Equal(t, want, rolled(map[string]map[string][]byte{secretName: issued("renewed", "ca")}), "%s renewed", secretName)
	}
	assert.Equal(t, []string{"demo-etcd"}, rolled(map[string]map[string][]byte{
		"demo-etcd-server": issued("renewed", "new-ca"), "demo-etcd-peer": issued("renewed", "new-ca"),
	}), "a new etcd CA rolls etcd, which reads it at start")
	assert.Equal(t, []string{"demo-apiserver"}, rolled(map[string]map[string][]byte{"demo-apiserver-etcd-client": issued("renewed", "new-ca")}),
		"the API servers read etcd's CA at start")
	assert.Empty(t, rolled(map[string]map[string][]byte{
		"demo-sa": {"tls.crt": []byte("renewed"), "tls.key": []byte("first-key"), "ca.crt": []byte("ca")},
	}), "the service account key's certificate renewed with the key kept")
	assert.Equal(t, []string{"demo-apiserver", "demo-controller-manager"}, rolled(map[string]map[string][]byte{
		"demo-sa": {"tls.crt": []byte("renewed"), "tls.key": []byte("another key"), "ca.crt": []byte("ca")},
	}), "a new service account key rolls the API servers and the controller manager, which read it at start")
}
