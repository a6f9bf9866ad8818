package envtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// warningEvents counts the Warning events with reason about the control plane,
// each repetition of a series included.
func warningEvents(t *testing.T, hcp *v1alpha1.HostedControlPlane, reason string) int32 {
	t.Helper()
	events := &eventsv1.EventList{}
	require.NoError(t, env.Client.List(testContext(t), events, client.InNamespace(hcp.Namespace)))
	n := int32(0)
	for _, e := range events.Items {
		if e.Regarding.Name != hcp.Name || e.Reason != reason || e.Type != corev1.EventTypeWarning {
			continue
		}
		n++
		if e.Series != nil {
			n += e.Series.Count - 1
		}
	}
	return n
}

// hasEvent waits for a Warning event with reason about the control plane.
func hasEvent(t *testing.T, hcp *v1alpha1.HostedControlPlane, reason string) {
	t.Helper()
	waitFor(t, "a "+reason+" event", func() error {
		events := &eventsv1.EventList{}
		if err := env.Client.List(testContext(t), events, client.InNamespace(hcp.Namespace)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == hcp.Name && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("%d events, none %s", len(events.Items), reason)
	})
}

// A missing Gateway, then one without a wildcard TLS passthrough listener,
// each get a condition and an event; a proper Gateway is then used.
func TestGatewayProblems(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	cluster := newCluster(t, ns, "gw", 0)
	hcp := newControlPlane(t, cluster, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Gateway = &v1alpha1.GatewayReference{Name: "capi", Namespace: ns}
	})
	c := waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.GatewayNotFoundReason)
	assert.Equal(t, "Gateway "+ns+"/capi does not exist: create it with a TLS passthrough listener on a wildcard hostname", c.Message)
	hasEvent(t, hcp, v1alpha1.GatewayNotFoundReason)

	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "capi"}}
	gw.Spec.GatewayClassName = "example"
	gw.Spec.Listeners = []gatewayv1.Listener{{Name: "https", Protocol: gatewayv1.HTTPSProtocolType, Port: 443, Hostname: ptr.To(gatewayv1.Hostname("*.k8s.example.com"))}}
	require.NoError(t, env.Client.Create(testContext(t), gw))
	c = waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.GatewayListenerReason)
	assert.Contains(t, c.Message, "has no listener with protocol TLS, tls.mode Passthrough and a wildcard hostname")
	hasEvent(t, hcp, v1alpha1.GatewayListenerReason)

	require.NoError(t, update(t, gw, func(g *gatewayv1.Gateway) {
		g.Spec.Listeners = append(g.Spec.Listeners, gatewayv1.Listener{
			Name: "tls", Protocol: gatewayv1.TLSProtocolType, Port: 8443, Hostname: ptr.To(gatewayv1.Hostname("*.k8s.example.com")),
			TLS: &gatewayv1.ListenerTLSConfig{Mode: ptr.To(gatewayv1.TLSModePassthrough)},
		})
	}))
	routesThroughGateway(t, hcp)
	host := "gw." + ns + ".k8s.example.com"
	waitFor(t, "the gateway endpoint", func() error {
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp); err != nil {
			return err
		}
		if hcp.Spec.ControlPlaneEndpoint != (clusterv1.APIEndpoint{Host: host, Port: 8443}) {
			return fmt.Errorf("endpoint %+v", hcp.Spec.ControlPlaneEndpoint)
		}
		return nil
	})
	for name, hostname := range map[string]string{"gw-apiserver": host, "gw-konnectivity": "konnectivity." + host, "gw-kas-tunnel": "kas-tunnel." + host} {
		route := get(t, &gatewayv1.TLSRoute{}, ns, name)
		assert.Equal(t, []gatewayv1.Hostname{gatewayv1.Hostname(hostname)}, route.Spec.Hostnames)
		assert.Equal(t, gatewayv1.SectionName("tls"), *route.Spec.ParentRefs[0].SectionName)
	}
	svc := get(t, &corev1.Service{}, ns, "gw-apiserver")
	assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type, "a gateway needs no load balancer")
}

// A Cluster without a service network stops the control plane with a
// condition, Available false saying why, and one event however often the
// pass is retried, until the network is set.
func TestClusterWithoutNetwork(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nonet"}}
	cluster.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "HostedControlPlane", Name: "nonet"}
	require.NoError(t, env.Client.Create(testContext(t), cluster))
	hcp := newControlPlane(t, cluster, nil)
	c := waitCondition(t, hcp, v1alpha1.ClusterReadyCondition, metav1.ConditionFalse, v1alpha1.ClusterNetworkMissingReason)
	assert.Contains(t, c.Message, "has no spec.clusterNetwork.services.cidrBlocks")
	hasEvent(t, hcp, v1alpha1.ClusterNetworkMissingReason)
	absent(t, &corev1.Service{}, ns, "nonet-apiserver")
	c = waitCondition(t, hcp, v1alpha1.AvailableCondition, metav1.ConditionFalse, v1alpha1.ClusterNetworkMissingReason)
	assert.Contains(t, c.Message, "the API server cannot answer before ClusterReady: ")
	// The controller retries with backoff all along; the situation has not
	// changed, so it is told once.
	time.Sleep(10 * time.Second)
	assert.Equal(t, int32(1), warningEvents(t, hcp, v1alpha1.ClusterNetworkMissingReason), "Warning events for one unchanged situation")

	require.NoError(t, update(t, cluster, func(c *clusterv1.Cluster) {
		c.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.128.0.0/16"}
	}))
	waitCondition(t, hcp, v1alpha1.ClusterReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	get(t, &corev1.Service{}, ns, "nonet-apiserver")
}

// An object of a name the control plane needs that someone else created is
// never taken over: a condition and an event say so until it is gone.
func TestConflictingObjectIsNeverOverwritten(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	theirs := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken-apiserver", Labels: map[string]string{"owner": "someone-else"}}}
	theirs.Spec.Ports = []corev1.ServicePort{{Name: "web", Port: 80}}
	require.NoError(t, env.Client.Create(testContext(t), theirs))
	before := theirs.DeepCopy()

	cluster := newCluster(t, ns, "taken", 0)
	hcp := newControlPlane(t, cluster, nil)
	c := waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.ConflictReason)
	assert.Equal(t, "Service "+ns+"/taken-apiserver exists and is not owned by this control plane; delete or rename it", c.Message)
	hasEvent(t, hcp, v1alpha1.ConflictReason)

	after := get(t, &corev1.Service{}, ns, "taken-apiserver")
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "their Service is untouched")
	assert.Empty(t, after.OwnerReferences)

	require.NoError(t, env.Client.Delete(testContext(t), after))
	waitFor(t, "our Service replaces theirs", func() error {
		svc := &corev1.Service{}
		if err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "taken-apiserver"}, svc); err != nil {
			return err
		}
		if len(svc.OwnerReferences) == 0 || !strings.Contains(svc.Spec.Ports[0].Name, "https") {
			return fmt.Errorf("not ours yet")
		}
		return nil
	})
}

// Without cert-manager's CRDs the control plane waits with a condition and
// an event, and carries on by itself once they are installed. This needs an
// API server of its own, without those CRDs, and a controller for it.
func TestCertManagerMissing(t *testing.T) {
	serial(t)
	own := withOwnAPIServer(t, CAPICRDs, GatewayAPICRDs)

	cluster := newCluster(t, namespace(t), "nocm", 0)
	hcp := newControlPlane(t, cluster, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureClusterIP}
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 1}
	})
	c := waitCondition(t, hcp, v1alpha1.CertificatesReadyCondition, metav1.ConditionFalse, v1alpha1.CertManagerMissingReason)
	assert.Equal(t, "cert-manager's CRDs are not installed: install cert-manager (v1.21 or later); retrying", c.Message)
	hasEvent(t, hcp, v1alpha1.CertManagerMissingReason)
	c = waitCondition(t, hcp, v1alpha1.AvailableCondition, metav1.ConditionFalse, v1alpha1.CertManagerMissingReason)
	assert.Equal(t, "the API server cannot answer before CertificatesReady: cert-manager's CRDs are not installed: install cert-manager (v1.21 or later); retrying", c.Message)

	require.NoError(t, own.InstallCRDs(CertManagerCRDs))
	// No cert-manager controllers run against this API server: the
	// certificates are requested and wait to be issued.
	c = waitCondition(t, hcp, v1alpha1.CertificatesReadyCondition, metav1.ConditionFalse, v1alpha1.IssuingReason)
	assert.Contains(t, c.Message, "waiting for cert-manager to issue 16 of 16 certificates: nocm-ca, ")
}

// Without Gateway API's CRDs a control plane behind a gateway waits with a
// condition, an event and Available false saying why. This needs an API
// server of its own, without those CRDs, and a controller for it.
func TestGatewayAPIMissing(t *testing.T) {
	serial(t)
	withOwnAPIServer(t, CAPICRDs, CertManagerCRDs)

	cluster := newCluster(t, namespace(t), "nogw", 0)
	hcp := newControlPlane(t, cluster, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Gateway = &v1alpha1.GatewayReference{Name: "capi", Namespace: "capi-system"}
	})
	c := waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.GatewayAPIMissingReason)
	assert.Equal(t, "Gateway API CRDs (Gateway, TLSRoute v1) are not installed; install them or remove spec.gateway", c.Message)
	hasEvent(t, hcp, v1alpha1.GatewayAPIMissingReason)
	c = waitCondition(t, hcp, v1alpha1.AvailableCondition, metav1.ConditionFalse, v1alpha1.GatewayAPIMissingReason)
	assert.Contains(t, c.Message, "the API server cannot answer before ExposureReady: Gateway API CRDs")
}

// routesThroughGateway plays the Gateway's controller, which does not run
// here: the control plane waits until its routes are accepted, and reports
// the Gateway's own reasons when they are not.
func routesThroughGateway(t *testing.T, hcp *v1alpha1.HostedControlPlane) {
	t.Helper()
	ns := hcp.Namespace
	c := waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.RoutePendingReason)
	assert.Equal(t, "waiting for Gateway "+ns+"/capi to accept TLSRoute "+ns+"/gw-apiserver", c.Message)
	assert.Empty(t, hcp.Spec.ControlPlaneEndpoint.Host, "no endpoint before the Gateway routes to it")

	say := func(name string, accepted, resolved metav1.Condition) {
		route := get(t, &gatewayv1.TLSRoute{}, ns, name)
		setStatus(t, route, func(r *gatewayv1.TLSRoute) {
			accepted.Type, resolved.Type = string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteConditionResolvedRefs)
			for _, c := range []*metav1.Condition{&accepted, &resolved} {
				c.ObservedGeneration, c.LastTransitionTime = r.Generation, metav1.Now()
			}
			r.Status.Parents = []gatewayv1.RouteParentStatus{{
				ParentRef: r.Spec.ParentRefs[0], ControllerName: "example.com/gateway",
				Conditions: []metav1.Condition{accepted, resolved},
			}}
		})
	}
	yes := metav1.Condition{Status: metav1.ConditionTrue, Reason: "Accepted"}
	say("gw-apiserver", metav1.Condition{Status: metav1.ConditionFalse, Reason: "NoMatchingListenerHostname", Message: "no listener matches"}, yes)
	c = waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.RouteNotAcceptedReason)
	assert.Equal(t, "Gateway "+ns+"/capi does not accept TLSRoute "+ns+"/gw-apiserver: NoMatchingListenerHostname: no listener matches", c.Message)
	hasEvent(t, hcp, v1alpha1.RouteNotAcceptedReason)

	say("gw-apiserver", yes, yes)
	say("gw-konnectivity", yes, metav1.Condition{Status: metav1.ConditionFalse, Reason: "BackendNotFound", Message: "no Service gw-apiserver"})
	c = waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.RouteRefsUnresolvedReason)
	assert.Equal(t, "Gateway "+ns+"/capi cannot resolve the backend of TLSRoute "+ns+"/gw-konnectivity: BackendNotFound: no Service gw-apiserver", c.Message)
	hasEvent(t, hcp, v1alpha1.RouteRefsUnresolvedReason)

	say("gw-konnectivity", yes, yes)
	waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.RoutePendingReason)
	say("gw-kas-tunnel", yes, yes)
	waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
}

// withOwnAPIServer starts an API server with only the given CRDs and a
// controller for it, and points the test's helpers at it until the test
// ends.
func withOwnAPIServer(t *testing.T, crds ...ModuleCRDs) *Env {
	t.Helper()
	own, err := StartWith(crds...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = own.Stop() })
	ctrl, err := own.StartController(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = ctrl.Stop(10 * time.Second) })
	shared := env
	env = own
	t.Cleanup(func() { env = shared })
	return own
}
