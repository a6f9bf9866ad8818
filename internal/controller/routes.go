package controller

import (
	"context"
	"fmt"
	"slices"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// hostnameField indexes the TLSRoutes of the Gateway cache by each hostname
// they claim, so that the routes claiming a control plane's hostnames are
// found without listing every route of the management cluster.
const hostnameField = "spec.hostnames"

func routeHostnames(obj client.Object) []string {
	route, ok := obj.(*gatewayv1.TLSRoute)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(route.Spec.Hostnames))
	for _, h := range route.Spec.Hostnames {
		out = append(out, string(h))
	}
	return out
}

// mapRoute wakes the control planes whose routes share a hostname with a
// route created, changed or deleted, whoever's it is: a route that claims a
// control plane's hostname, or stops claiming it, changes what ExposureReady
// says.
func (r *Reconciler) mapRoute(ctx context.Context, obj client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, host := range routeHostnames(obj) {
		routes := &gatewayv1.TLSRouteList{}
		if err := r.gateways.List(ctx, routes, client.MatchingFields{hostnameField: host}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list TLSRoutes by hostname", "hostname", host)
			return nil
		}
		for _, route := range routes.Items {
			name, ours := route.Labels[contract.ControlPlaneLabel]
			if ours && route.Labels[contract.ManagedByLabel] == contract.ManagedBy {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: route.Namespace, Name: name}})
			}
		}
	}
	return out
}

// observeRouteClaims finds the routes, other than the control plane's own,
// that claim the hostnames its routes serve on its Gateway listener. It
// reads the Gateway cache, which holds every TLSRoute; nothing is read
// before that cache watches them (their CRD missing: applying our routes
// then says so).
func (r *Reconciler) observeRouteClaims(ctx context.Context, cp *v1alpha1.HostedControlPlane, listener contract.GatewayListener, hosts []string) ([]render.RouteClaim, error) {
	if r.gateways == nil || !r.watches.indexed(hostnameField) {
		return nil, nil
	}
	var claims []render.RouteClaim
	for _, host := range hosts {
		routes := &gatewayv1.TLSRouteList{}
		if err := r.gateways.List(ctx, routes, client.MatchingFields{hostnameField: host}); err != nil {
			return nil, fmt.Errorf("list TLSRoutes claiming %s: %w", host, err)
		}
		for i := range routes.Items {
			route := &routes.Items[i]
			if metav1.IsControlledBy(route, cp) || !attached(route, cp.Spec.Gateway, listener) {
				continue
			}
			claims = append(claims, render.RouteClaim{Route: route.Namespace + "/" + route.Name, Hostname: host, Created: route.CreationTimestamp})
		}
	}
	return claims, nil
}

// attached tells whether a route claims a place on the listener of gw: a
// parent reference to that Gateway, on that listener or on all of them,
// that the Gateway has not refused.
func attached(route *gatewayv1.TLSRoute, gw *v1alpha1.GatewayReference, listener contract.GatewayListener) bool {
	return slices.ContainsFunc(route.Spec.ParentRefs, func(p gatewayv1.ParentReference) bool {
		if ptr.Deref(p.Group, gatewayv1.GroupName) != gatewayv1.GroupName || ptr.Deref(p.Kind, "Gateway") != "Gateway" ||
			string(p.Name) != gw.Name || string(ptr.Deref(p.Namespace, gatewayv1.Namespace(route.Namespace))) != gw.Namespace {
			return false
		}
		if s := p.SectionName; s != nil && *s != listener.Name {
			return false
		}
		if port := p.Port; port != nil && *port != listener.Port {
			return false
		}
		return !refused(route, p)
	})
}

// refused tells whether the Gateway said it does not accept the route on
// parent p.
func refused(route *gatewayv1.TLSRoute, p gatewayv1.ParentReference) bool {
	for _, st := range route.Status.Parents {
		if st.ParentRef.Name == p.Name && ptr.Deref(st.ParentRef.Namespace, "") == ptr.Deref(p.Namespace, "") &&
			ptr.Deref(st.ParentRef.SectionName, "") == ptr.Deref(p.SectionName, "") {
			c := apimeta.FindStatusCondition(st.Conditions, string(gatewayv1.RouteConditionAccepted))
			return c != nil && c.Status == metav1.ConditionFalse
		}
	}
	return false
}
