package components

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Exposure is how the API server is reached from outside: TLSRoutes through
// the gateway (the API server, konnectivity, and the tunnel that carries the
// workload cluster's kubernetes Service), or a Service of the chosen type.
// The controller observes where it serves (the gateway's listener, the
// Service's address) before rendering; see ServiceEndpoint.
type Exposure struct{}

// Name names its golden file.
func (Exposure) Name() string { return "exposure" }

// Condition reports it.
func (Exposure) Condition() string { return v1alpha1.ExposureReadyCondition }

// Render renders the API server's Service and, behind a gateway, its routes.
func (Exposure) Render(in render.Input) ([]client.Object, error) {
	svc := apiServerService(in)
	if in.Listener == nil {
		return []client.Object{svc}, nil
	}
	return []client.Object{
		svc,
		tlsRoute(in, in.Name("apiserver"), contract.GatewayHost(in.ClusterName(), in.Namespace(), in.Listener.Domain), servicePort(in)),
		tlsRoute(in, in.Name("konnectivity"), konnectivityHost(in), contract.KonnectivityPort),
		tlsRoute(in, in.Name("kas-tunnel"), tunnelHost(in), contract.TunnelPort),
	}, nil
}

// Ready is done once the control plane is served at a known endpoint. Behind
// a gateway, nothing is reported reachable before the Gateway routes to it,
// nor while another route claims one of its hostnames first.
func (Exposure) Ready(ctx context.Context, c client.Reader, in render.Input, applied readiness.Applied) (readiness.Outcome, error) {
	var yielding []string
	for _, obj := range applied.Objects {
		want, ok := obj.(*gatewayv1.TLSRoute)
		if !ok {
			continue
		}
		route, found := cachedRoute(ctx, c, want)
		if !found {
			return routePending(want), nil
		}
		out, claims := hostnameClaims(in, route)
		if claims != nil {
			return *claims, nil
		}
		yielding = append(yielding, out...)
		if out, accepted := routeAccepted(want, route); !accepted {
			return out, nil
		}
	}
	ep := in.Endpoint
	if ep.Host == "" || ep.Port == 0 {
		typ := ExposureType(in.ControlPlane)
		out := readiness.Waiting(v1alpha1.EndpointPendingReason, "waiting for an address of Service %s (type %s)",
			contract.APIServerServiceName(in.ClusterName()), typ)
		// A NodePort Service waits for a ready node, which is not watched.
		out.Poll = typ == corev1.ServiceTypeNodePort
		return out, nil
	}
	return readiness.Ready(strings.Join(append([]string{fmt.Sprintf("served at https://%s:%d", ep.Host, ep.Port)}, yielding...), "; ")), nil
}

// hostnameClaims reads the other routes that claim the hostname of one of
// ours. One that takes precedence by Gateway API's rule (the oldest route,
// then the first by namespace/name) gets its connections: a problem that
// names it. Those that yield to ours are only told of.
func hostnameClaims(in render.Input, ours *gatewayv1.TLSRoute) (yielding []string, problem *readiness.Outcome) {
	name := ours.Namespace + "/" + ours.Name
	for _, claim := range in.RouteClaims {
		if !slices.Contains(ours.Spec.Hostnames, gatewayv1.Hostname(claim.Hostname)) {
			continue
		}
		first := claim.Created.Before(&ours.CreationTimestamp) ||
			(claim.Created.Equal(&ours.CreationTimestamp) && claim.Route < name)
		if first {
			out := readiness.Problem(v1alpha1.HostnameConflictReason,
				"TLSRoute %s claims the hostname %s of TLSRoute %s on the same Gateway listener and, being older, takes precedence: "+
					"the Gateway sends that hostname's connections there, not to this control plane; the route's owner must remove it "+
					"(the platform can keep each namespace to its own hostnames with config/policy)",
				claim.Route, claim.Hostname, name)
			return nil, &out
		}
		yielding = append(yielding, fmt.Sprintf("TLSRoute %s claims the hostname %s too, but TLSRoute %s is older and takes precedence",
			claim.Route, claim.Hostname, name))
	}
	return yielding, nil
}

// cachedRoute reads a route as applied; false while the cache does not
// hold it yet, which the next pass sees.
func cachedRoute(ctx context.Context, c client.Reader, want *gatewayv1.TLSRoute) (*gatewayv1.TLSRoute, bool) {
	route := &gatewayv1.TLSRoute{}
	return route, c.Get(ctx, client.ObjectKeyFromObject(want), route) == nil
}

// routePending is the outcome of a route the Gateway has not yet said
// that it routes.
func routePending(want *gatewayv1.TLSRoute) readiness.Outcome {
	parent := want.Spec.ParentRefs[0]
	gw := fmt.Sprintf("%s/%s", ptr.Deref(parent.Namespace, gatewayv1.Namespace(want.Namespace)), parent.Name)
	return readiness.Waiting(v1alpha1.RoutePendingReason, "waiting for Gateway %s to accept TLSRoute %s/%s", gw, want.Namespace, want.Name)
}

// routeAccepted reads what the Gateway says of a TLSRoute it should route:
// accepted, with its references resolved, for the route's current spec.
// Otherwise the outcome carries the Gateway's own reason and message.
func routeAccepted(want, route *gatewayv1.TLSRoute) (readiness.Outcome, bool) {
	parent := want.Spec.ParentRefs[0]
	gw := fmt.Sprintf("%s/%s", ptr.Deref(parent.Namespace, gatewayv1.Namespace(want.Namespace)), parent.Name)
	name := want.Namespace + "/" + want.Name
	pending := routePending(want)
	for _, st := range route.Status.Parents {
		if !sameParent(st.ParentRef, parent, route.Namespace) {
			continue
		}
		for _, check := range []struct {
			condition gatewayv1.RouteConditionType
			reason    string
			says      string
		}{
			{gatewayv1.RouteConditionAccepted, v1alpha1.RouteNotAcceptedReason, "does not accept"},
			{gatewayv1.RouteConditionResolvedRefs, v1alpha1.RouteRefsUnresolvedReason, "cannot resolve the backend of"},
		} {
			c := apimeta.FindStatusCondition(st.Conditions, string(check.condition))
			switch {
			case c == nil || (c.ObservedGeneration != 0 && c.ObservedGeneration < route.Generation):
				return pending, false // not yet seen, or seen before the current spec
			case c.Status != metav1.ConditionTrue:
				return readiness.Problem(check.reason, "Gateway %s %s TLSRoute %s: %s: %s", gw, check.says, name, c.Reason, c.Message), false
			}
		}
		return readiness.Outcome{}, true
	}
	return pending, false
}

// sameParent tells whether a route's status is about the parent it names;
// an unset namespace is the route's own.
func sameParent(got, want gatewayv1.ParentReference, routeNamespace string) bool {
	ns := func(p gatewayv1.ParentReference) gatewayv1.Namespace {
		return ptr.Deref(p.Namespace, gatewayv1.Namespace(routeNamespace))
	}
	return got.Name == want.Name && ns(got) == ns(want) && ptr.Deref(got.SectionName, "") == ptr.Deref(want.SectionName, "")
}

// ExposureType is the Service type that serves the API server.
func ExposureType(cp *v1alpha1.HostedControlPlane) corev1.ServiceType {
	spec := cp.Spec
	switch {
	case spec.Gateway != nil:
		return corev1.ServiceTypeClusterIP
	case spec.Exposure == nil || spec.Exposure.Type == "":
		return corev1.ServiceTypeLoadBalancer
	default:
		return corev1.ServiceType(spec.Exposure.Type)
	}
}

// servicePort is the API server Service's port: the Cluster's apiServerPort
// or 6443.
func servicePort(in render.Input) int32 {
	if p := in.Cluster.Spec.ClusterNetwork.APIServerPort; p != 0 {
		return p
	}
	return contract.APIServerPort
}

// konnectivityHost is where agents reach the konnectivity server: its own
// name on a gateway, the API server's address otherwise.
func konnectivityHost(in render.Input) string {
	if in.Listener != nil {
		return "konnectivity." + contract.GatewayHost(in.ClusterName(), in.Namespace(), in.Listener.Domain)
	}
	return in.Endpoint.Host
}

// RouteHostnames are the hostnames of the routes Render gives a control
// plane served through listener.
func RouteHostnames(in render.Input, listener contract.GatewayListener) []string {
	in = in.With(render.Observed{Listener: &listener})
	return []string{contract.GatewayHost(in.ClusterName(), in.Namespace(), listener.Domain), konnectivityHost(in), tunnelHost(in)}
}

// tunnelHost is the outer SNI of the kubernetes Service's tunnel, in gateway
// mode.
func tunnelHost(in render.Input) string {
	return contract.TunnelHost(in.ClusterName(), in.Namespace(), in.Listener.Domain)
}

// apiServerURL is where workers reach the API server.
func apiServerURL(in render.Input) string {
	return fmt.Sprintf("https://%s:%d", in.Endpoint.Host, in.Endpoint.Port)
}

func apiServerService(in render.Input) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: in.Meta(contract.APIServerServiceName(in.ClusterName()), contract.APIServerComponent),
		Spec: corev1.ServiceSpec{
			Type:     ExposureType(in.ControlPlane),
			Selector: in.Selector(contract.APIServerComponent),
			Ports: []corev1.ServicePort{
				{Name: "https", Port: servicePort(in), TargetPort: intstr.FromString("https"), Protocol: corev1.ProtocolTCP},
				{Name: "konnectivity", Port: contract.KonnectivityPort, TargetPort: intstr.FromString("konnectivity"), Protocol: corev1.ProtocolTCP},
			},
		},
	}
	if in.Listener != nil {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: contract.TunnelPortName, Port: contract.TunnelPort, TargetPort: intstr.FromString(contract.TunnelPortName), Protocol: corev1.ProtocolTCP,
		})
	}
	// A NodePort endpoint's port is the node port: the one the user asked
	// for, or the one allocated first and recorded, which then stays.
	if svc.Spec.Type == corev1.ServiceTypeNodePort {
		svc.Spec.Ports[0].NodePort = in.ControlPlane.Spec.ControlPlaneEndpoint.Port
	}
	return svc
}

func tlsRoute(in render.Input, name, host string, port int32) *gatewayv1.TLSRoute {
	gw := in.ControlPlane.Spec.Gateway
	return &gatewayv1.TLSRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "TLSRoute"},
		ObjectMeta: in.Meta(name, contract.APIServerComponent),
		Spec: gatewayv1.TLSRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
				Group:       ptr.To(gatewayv1.Group(gatewayv1.GroupName)),
				Kind:        ptr.To(gatewayv1.Kind("Gateway")),
				Name:        gatewayv1.ObjectName(gw.Name),
				Namespace:   ptr.To(gatewayv1.Namespace(gw.Namespace)),
				SectionName: ptr.To(in.Listener.Name),
			}}},
			Hostnames: []gatewayv1.Hostname{gatewayv1.Hostname(host)},
			Rules: []gatewayv1.TLSRouteRule{{BackendRefs: []gatewayv1.BackendRef{{
				BackendObjectReference: gatewayv1.BackendObjectReference{
					Name: gatewayv1.ObjectName(contract.APIServerServiceName(in.ClusterName())),
					Port: ptr.To(port),
				},
			}}}},
		},
	}
}

// ServiceEndpoint reads the endpoint a Service of the exposure type offers:
// the load balancer's address, or the allocated node port with the host the
// user set (empty when unset: see NodeAddress), or the endpoint the user set
// for a ClusterIP Service. It reports false while the Service has no address
// or node port yet.
func ServiceEndpoint(cp *v1alpha1.HostedControlPlane, svc *corev1.Service) (host string, port int32, ok bool) {
	user := cp.Spec.ControlPlaneEndpoint
	switch svc.Spec.Type {
	case corev1.ServiceTypeLoadBalancer:
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				return ing.IP, portOf(svc, "https", false), true
			}
			if ing.Hostname != "" {
				return ing.Hostname, portOf(svc, "https", false), true
			}
		}
		return "", 0, false
	case corev1.ServiceTypeNodePort:
		port = portOf(svc, "https", true)
		return user.Host, port, port != 0
	default:
		return user.Host, user.Port, user.Host != ""
	}
}

// KonnectivityServicePort is where agents reach the konnectivity server
// through the exposure Service: its node port for a NodePort Service, its
// port otherwise.
func KonnectivityServicePort(svc *corev1.Service) int32 {
	return portOf(svc, "konnectivity", svc.Spec.Type == corev1.ServiceTypeNodePort)
}

func portOf(svc *corev1.Service, name string, node bool) int32 {
	for _, p := range svc.Spec.Ports {
		if p.Name == name {
			if node {
				return p.NodePort
			}
			return p.Port
		}
	}
	return 0
}

// NodeAddress is where a NodePort Service is reached when the user named no
// host: the external address of the first ready node by name, or its
// internal one; empty while no node is ready.
func NodeAddress(nodes []corev1.Node) string {
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes {
		if !nodeReady(&n) {
			continue
		}
		for _, t := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
			for _, a := range n.Status.Addresses {
				if a.Type == t && a.Address != "" {
					return a.Address
				}
			}
		}
	}
	return ""
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
