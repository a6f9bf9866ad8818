package controller

import (
	"context"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
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

// A kind counts as watched only when that kind is: typed objects carry no
// kind of their own, so a watched Certificate is no watched Gateway (the
// Gateway would then be read from a cache that does not hold it).
func TestWatchingTellsKindsApart(t *testing.T) {
	w := &optionalWatches{kinds: []optionalKind{
		{obj: &cmv1.Certificate{}, watched: true},
		{obj: &gatewayv1.Gateway{}},
		{obj: ciliumNetworkPolicy()},
	}}
	assert.True(t, w.watching(&cmv1.Certificate{}))
	assert.False(t, w.watching(&gatewayv1.Gateway{}))
	assert.False(t, w.watching(ciliumNetworkPolicy()))
	w.kinds[1].watched = true
	assert.True(t, w.watching(&gatewayv1.Gateway{}))
	other := ciliumNetworkPolicy()
	other.SetKind("CiliumClusterwideNetworkPolicy")
	w.kinds[2].watched = true
	assert.True(t, w.watching(ciliumNetworkPolicy()))
	assert.False(t, w.watching(other))
}

// A CRD makes the controller look for the optional kinds again only when
// it is of the group of one of them: cert-manager's, Gateway API's or
// Cilium's, by the group its name ends with.
func TestCRDsOfOptionalGroups(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, cmv1.AddToScheme(scheme))
	require.NoError(t, gatewayv1.Install(scheme))
	w := &optionalWatches{client: fake.NewClientBuilder().WithScheme(scheme).Build(), kinds: []optionalKind{
		{obj: &cmv1.Certificate{}},
		{obj: &gatewayv1.Gateway{}},
		{obj: ciliumNetworkPolicy()},
	}}
	assert.True(t, w.ofOptionalGroup("clusterissuers.cert-manager.io"))
	assert.True(t, w.ofOptionalGroup("ciliumnetworkpolicies.cilium.io"))
	assert.True(t, w.ofOptionalGroup("gateways.gateway.networking.k8s.io"))
	assert.False(t, w.ofOptionalGroup("clusters.cluster.x-k8s.io"))
	assert.False(t, w.ofOptionalGroup("notcilium.io"))
}

// lookCounter is a client that counts the controller's looks for a kind.
type lookCounter struct {
	client.Client
	looks int
}

func (c *lookCounter) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	c.looks++
	return c.Client.IsObjectNamespaced(obj)
}

// While an optional kind's CRD is missing, the passes look for it again
// after ever longer waits, up to a quarter of an hour, and a CRD of its
// group has them look at once and soon again.
func TestMissingKindsLookedForLessOften(t *testing.T) {
	counter := &lookCounter{Client: fake.NewClientBuilder().WithScheme(runtime.NewScheme()).Build()}
	w := &optionalWatches{client: counter, kinds: []optionalKind{{obj: ciliumNetworkPolicy()}}}
	ctx := context.Background()
	look := func(ago time.Duration) int {
		before := counter.looks
		if !w.lookedAt.IsZero() {
			w.lookedAt = time.Now().Add(-ago)
		}
		assert.False(t, w.ensureLocked(ctx), "no watch starts")
		return counter.looks - before
	}
	assert.Equal(t, 1, look(0), "the first pass looks")
	assert.Equal(t, 0, look(20*time.Second), "not again within 30 s")
	var waits []time.Duration
	for range 8 {
		wait := w.lookEvery
		assert.Equal(t, 0, look(wait-time.Second), "not again within %s", wait)
		assert.Equal(t, 1, look(wait), "again after %s", wait)
		waits = append(waits, wait)
	}
	assert.Equal(t, []time.Duration{
		30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
		15 * time.Minute, 15 * time.Minute, 15 * time.Minute,
	}, waits)
	// A CRD of Cilium's group (crdChanged) clears when they last looked.
	w.lookedAt = time.Time{}
	assert.Equal(t, 1, look(0), "a CRD of its group: at once")
	assert.Equal(t, 1, look(30*time.Second), "and again 30 s later")
}
