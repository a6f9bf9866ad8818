package envtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// passthroughGateway creates a Gateway with a TLS passthrough listener
// "tls" on *.k8s.example.com that admits routes from every namespace, as
// the documented one does.
func passthroughGateway(t *testing.T, ns string) *gatewayv1.Gateway {
	t.Helper()
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "capi"}}
	gw.Spec.GatewayClassName = "example"
	gw.Spec.Listeners = []gatewayv1.Listener{{
		Name: "tls", Protocol: gatewayv1.TLSProtocolType, Port: 8443, Hostname: ptr.To(gatewayv1.Hostname("*.k8s.example.com")),
		TLS:           &gatewayv1.ListenerTLSConfig{Mode: ptr.To(gatewayv1.TLSModePassthrough)},
		AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr.To(gatewayv1.NamespacesFromAll)}},
	}}
	require.NoError(t, env.Client.Create(testContext(t), gw))
	return gw
}

// tlsRoute is a route of a tenant on gw's listener "tls" for hostnames.
func tlsRoute(ns, name string, gw *gatewayv1.Gateway, hostnames ...string) *gatewayv1.TLSRoute {
	route := &gatewayv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	route.Spec.ParentRefs = []gatewayv1.ParentReference{{
		Name: gatewayv1.ObjectName(gw.Name), Namespace: ptr.To(gatewayv1.Namespace(gw.Namespace)), SectionName: ptr.To(gatewayv1.SectionName("tls")),
	}}
	for _, h := range hostnames {
		route.Spec.Hostnames = append(route.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	route.Spec.Rules = []gatewayv1.TLSRouteRule{{BackendRefs: []gatewayv1.BackendRef{{
		BackendObjectReference: gatewayv1.BackendObjectReference{Name: "mine", Port: ptr.To[gatewayv1.PortNumber](443)},
	}}}}
	return route
}

// acceptRoutes plays the Gateway's controller, which does not run here: it
// accepts the control plane's routes.
func acceptRoutes(t *testing.T, hcp *v1alpha1.HostedControlPlane) {
	t.Helper()
	for _, suffix := range []string{"-apiserver", "-konnectivity", "-kas-tunnel"} {
		route := get(t, &gatewayv1.TLSRoute{}, hcp.Namespace, hcp.Name+suffix)
		setStatus(t, route, func(r *gatewayv1.TLSRoute) {
			var conds []metav1.Condition
			for _, typ := range []gatewayv1.RouteConditionType{gatewayv1.RouteConditionAccepted, gatewayv1.RouteConditionResolvedRefs} {
				conds = append(conds, metav1.Condition{
					Type: string(typ), Status: metav1.ConditionTrue, Reason: string(typ), ObservedGeneration: r.Generation, LastTransitionTime: metav1.Now(),
				})
			}
			r.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: r.Spec.ParentRefs[0], ControllerName: "example.com/gateway", Conditions: conds}}
		})
	}
}

// A tenant claims a hostname of a control plane before it exists (the
// documented Gateway admits routes from every namespace, and the oldest
// route wins): ExposureReady names that route, with one Warning event, and
// nothing is reported reachable. Once it is gone the control plane is
// served; a later claim yields to the control plane's older route, and
// ExposureReady says so without holding anything up.
func TestHostnameClaimedByAnotherRoute(t *testing.T) {
	parallel(t)
	gw := passthroughGateway(t, namespace(t))
	victim, squatter := namespace(t), namespace(t)
	host := "prod." + victim + ".k8s.example.com"
	squat := tlsRoute(squatter, "squat", gw, "app."+squatter+".k8s.example.com", "konnectivity."+host)
	require.NoError(t, env.Client.Create(testContext(t), squat))
	// Precedence goes by creation time, in seconds: ours comes a second later.
	time.Sleep(time.Until(squat.CreationTimestamp.Add(1100 * time.Millisecond)))

	hcp := newControlPlane(t, newCluster(t, victim, "prod", 0), func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Gateway = &v1alpha1.GatewayReference{Name: gw.Name, Namespace: gw.Namespace}
	})
	acceptRoutes(t, hcp)
	c := waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.HostnameConflictReason)
	assert.Equal(t, "TLSRoute "+squatter+"/squat claims the hostname konnectivity."+host+" of TLSRoute "+victim+"/prod-konnectivity "+
		"on the same Gateway listener and, being older, takes precedence: the Gateway sends that hostname's connections there, "+
		"not to this control plane; the route's owner must remove it (the platform can keep each namespace to its own hostnames with config/policy)", c.Message)
	hasEvent(t, hcp, v1alpha1.HostnameConflictReason)
	assert.Empty(t, hcp.Spec.ControlPlaneEndpoint.Host, "not reported reachable")

	require.NoError(t, env.Client.Delete(testContext(t), squat))
	c = waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	assert.Equal(t, "served at https://"+host+":8443", c.Message)

	late := tlsRoute(squatter, "late", gw, host)
	require.NoError(t, env.Client.Create(testContext(t), late))
	waitFor(t, "ExposureReady telling of the later claim", func() error {
		c = waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
		want := "served at https://" + host + ":8443; TLSRoute " + squatter + "/late claims the hostname " + host +
			" too, but TLSRoute " + victim + "/prod-apiserver is older and takes precedence"
		if c.Message != want {
			return fmt.Errorf("message %q", c.Message)
		}
		return nil
	})

	// A route the Gateway refuses holds nothing.
	setStatus(t, late, func(r *gatewayv1.TLSRoute) {
		r.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: r.Spec.ParentRefs[0], ControllerName: "example.com/gateway", Conditions: []metav1.Condition{{
			Type: string(gatewayv1.RouteConditionAccepted), Status: metav1.ConditionFalse, Reason: "NotAllowedByListeners", LastTransitionTime: metav1.Now(),
		}}}}
	})
	// Only a change of its spec wakes the control planes whose hostnames it claims.
	require.NoError(t, update(t, late, func(r *gatewayv1.TLSRoute) {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname("late."+squatter+".k8s.example.com"))
	}))
	waitFor(t, "ExposureReady no longer telling of a refused route", func() error {
		c = waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
		if c.Message != "served at https://"+host+":8443" {
			return fmt.Errorf("message %q", c.Message)
		}
		return nil
	})
}

// applyPolicy creates the objects of config/policy, as
// `kubectl apply -k config/policy` would, and removes them when the test
// ends.
func applyPolicy(t *testing.T, gw *gatewayv1.Gateway) {
	t.Helper()
	ctx := testContext(t)
	// Registered first, so it runs last: the tests after this one are not
	// refused by a policy the API server has not let go of yet.
	t.Cleanup(func() {
		probe := tlsRoute(gw.Namespace, "after-policy", gw, "prod.elsewhere.k8s.example.com")
		waitFor(t, "the policy gone", func() error { return env.Client.Create(testContext(t), probe) })
		_ = env.Client.Delete(testContext(t), probe)
	})
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hosted-control-plane-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	createConfig(t, "policy", "params.yaml", "tlsroute-hostnames.yaml")
}

// createConfig creates the objects of files in config/dir, as
// `kubectl apply` would, and deletes them when the test ends.
func createConfig(t *testing.T, dir string, files ...string) {
	t.Helper()
	ctx := testContext(t)
	for _, file := range files {
		f, err := os.Open(filepath.Join(env.Root, "config", dir, file))
		require.NoError(t, err)
		d := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			obj, err := DecodeObject(d)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			require.NoError(t, env.Client.Create(ctx, obj))
			t.Cleanup(func() { _ = env.Client.Delete(testContext(t), obj) })
		}
		require.NoError(t, f.Close())
	}
}

// The policy of config/policy, enforced by the real API server: a TLSRoute
// may claim hostnames of the platform's domain only under its own
// namespace, and the controller's own routes fit. Not parallel: the policy
// binds every TLSRoute of the API server, the other tests' too.
func TestTLSRouteHostnamePolicy(t *testing.T) {
	serial(t)
	gw := passthroughGateway(t, namespace(t))
	tenant, other := namespace(t), namespace(t)
	applyPolicy(t, gw)

	want := "spec.hostnames: prod." + other + ".k8s.example.com: a TLSRoute in namespace " + tenant +
		" may claim hostnames of k8s.example.com only under *." + tenant + ".k8s.example.com (the platform policy tlsroute-hostnames.controlplane.cluster.x-k8s.io)"
	waitFor(t, "the policy in force", func() error {
		err := env.Client.Create(testContext(t), tlsRoute(tenant, "squat", gw, "prod."+other+".k8s.example.com"))
		if err == nil {
			_ = env.Client.Delete(testContext(t), tlsRoute(tenant, "squat", gw))
			return errors.New("admitted")
		}
		if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			return err
		}
		assert.Contains(t, err.Error(), want)
		return nil
	})
	for _, refused := range [][]string{
		{"*.k8s.example.com"},
		{"*.example.com"},
		{"k8s.example.com"},
		{tenant + ".k8s.example.com"},
		{"ok." + tenant + ".k8s.example.com", "konnectivity.prod." + other + ".k8s.example.com"},
		{"prod." + tenant + "x.k8s.example.com"},
	} {
		err := env.Client.Create(testContext(t), tlsRoute(tenant, "refused", gw, refused...))
		require.Error(t, err, "%v", refused)
		assert.Contains(t, err.Error(), "a TLSRoute in namespace "+tenant+" may claim hostnames of k8s.example.com only under *."+tenant+".k8s.example.com")
	}
	for i, admitted := range [][]string{
		{"app." + tenant + ".k8s.example.com"},
		{"*." + tenant + ".k8s.example.com", "kas-tunnel.dev." + tenant + ".k8s.example.com"},
		{"app.example.org"},
	} {
		require.NoError(t, env.Client.Create(testContext(t), tlsRoute(tenant, fmt.Sprintf("ok-%d", i), gw, admitted...)), "%v", admitted)
	}

	hcp := newControlPlane(t, newCluster(t, tenant, "prod", 0), func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Gateway = &v1alpha1.GatewayReference{Name: gw.Name, Namespace: gw.Namespace}
	})
	for _, suffix := range []string{"-apiserver", "-konnectivity", "-kas-tunnel"} {
		get(t, &gatewayv1.TLSRoute{}, tenant, "prod"+suffix)
	}
	c := waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.RoutePendingReason)
	assert.Contains(t, c.Message, "waiting for Gateway "+gw.Namespace+"/capi to accept TLSRoute "+tenant+"/prod-")

	// Without its parameters the policy fails closed.
	params := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(testContext(t), client.ObjectKey{Namespace: "hosted-control-plane-system", Name: "tlsroute-hostnames"}, params))
	require.NoError(t, update(t, params, func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"domains": " "} }))
	waitFor(t, "the policy refusing routes without domains", func() error {
		err := env.Client.Create(testContext(t), tlsRoute(tenant, "nodomains", gw, "prod."+tenant+".k8s.example.com"))
		if err == nil {
			_ = env.Client.Delete(testContext(t), tlsRoute(tenant, "nodomains", gw))
			return errors.New("admitted")
		}
		assert.Contains(t, err.Error(), "names no domains")
		return nil
	})
}
