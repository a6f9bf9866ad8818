package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// A route claims a place on the control plane's listener through a parent
// reference to its Gateway, on that listener or all of them, that the
// Gateway has not refused.
func TestAttached(t *testing.T) {
	gw := &v1alpha1.GatewayReference{Namespace: "capi-system", Name: "capi"}
	listener := contract.GatewayListener{Name: "tls", Domain: "k8s.example.com", Port: 8443}
	route := func(ns string, parent gatewayv1.ParentReference, accepted *metav1.ConditionStatus) *gatewayv1.TLSRoute {
		r := &gatewayv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"}}
		r.Spec.ParentRefs = []gatewayv1.ParentReference{parent}
		if accepted != nil {
			r.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: parent, Conditions: []metav1.Condition{
				{Type: string(gatewayv1.RouteConditionAccepted), Status: *accepted},
			}}}
		}
		return r
	}
	ref := func(ns, name string, section *string, port *int32) gatewayv1.ParentReference {
		p := gatewayv1.ParentReference{Name: gatewayv1.ObjectName(name), SectionName: (*gatewayv1.SectionName)(section), Port: port}
		if ns != "" {
			p.Namespace = ptr.To(gatewayv1.Namespace(ns))
		}
		return p
	}
	no, yes := metav1.ConditionFalse, metav1.ConditionTrue
	for name, tc := range map[string]struct {
		route *gatewayv1.TLSRoute
		want  bool
	}{
		"every listener":            {route("team-a", ref("capi-system", "capi", nil, nil), nil), true},
		"our listener, accepted":    {route("team-a", ref("capi-system", "capi", ptr.To("tls"), ptr.To[int32](8443)), &yes), true},
		"the Gateway's namespace":   {route("capi-system", ref("", "capi", nil, nil), nil), true},
		"refused by the Gateway":    {route("team-a", ref("capi-system", "capi", nil, nil), &no), false},
		"another listener":          {route("team-a", ref("capi-system", "capi", ptr.To("https"), nil), nil), false},
		"another port":              {route("team-a", ref("capi-system", "capi", nil, ptr.To[int32](443)), nil), false},
		"another Gateway":           {route("team-a", ref("capi-system", "other", nil, nil), nil), false},
		"a Gateway of its own name": {route("team-a", ref("", "capi", nil, nil), nil), false},
	} {
		assert.Equal(t, tc.want, attached(tc.route, gw, listener), name)
	}
}
