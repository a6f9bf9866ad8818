package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// A Gateway wakes the control planes served through it, in any namespace,
// and no other.
func TestMapGateway(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	hcp := func(ns, name string, gw *v1alpha1.GatewayReference) client.Object {
		return &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.HostedControlPlaneSpec{ControlPlaneSettings: v1alpha1.ControlPlaneSettings{Gateway: gw}}}
	}
	r := &Reconciler{client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		hcp("a", "one", &v1alpha1.GatewayReference{Name: "capi", Namespace: "capi-system"}),
		hcp("b", "two", &v1alpha1.GatewayReference{Name: "capi", Namespace: "capi-system"}),
		hcp("c", "other-gateway", &v1alpha1.GatewayReference{Name: "edge", Namespace: "capi-system"}),
		hcp("d", "same-name-elsewhere", &v1alpha1.GatewayReference{Name: "capi", Namespace: "d"}),
		hcp("e", "service", nil),
	).Build()}
	got := r.mapGateway(context.Background(), &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "capi-system", Name: "capi"}})
	assert.ElementsMatch(t, []reconcile.Request{
		{NamespacedName: client.ObjectKey{Namespace: "a", Name: "one"}},
		{NamespacedName: client.ObjectKey{Namespace: "b", Name: "two"}},
	}, got)
}
