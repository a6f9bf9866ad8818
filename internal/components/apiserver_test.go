package components

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Two API servers or more drain one at a time; a single one has no budget,
// which could only ever allow its one pod to go.
func TestAPIServerDisruptionBudget(t *testing.T) {
	for replicas, want := range map[int32]bool{1: false, 2: true, 3: true} {
		in := goldenCase{cp: func(cp *v1alpha1.HostedControlPlane) { cp.Spec.Replicas = ptr.To(replicas) }}.input(t)
		objs, err := APIServer{}.Render(in)
		require.NoError(t, err)
		var budgets []*policyv1.PodDisruptionBudget
		for _, obj := range objs {
			if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
				budgets = append(budgets, pdb)
			}
		}
		if !want {
			assert.Empty(t, budgets, "%d API servers", replicas)
			continue
		}
		if assert.Len(t, budgets, 1, "%d API servers", replicas) {
			assert.Equal(t, in.Selector(contract.APIServerComponent), budgets[0].Spec.Selector.MatchLabels)
			assert.Equal(t, 1, budgets[0].Spec.MaxUnavailable.IntValue())
		}
	}
}

// Each TLSRoute leads to a port the API server's Service has, also when the
// Cluster moves the API server's port.
func TestGatewayRoutesLeadToServicePorts(t *testing.T) {
	for _, port := range []int32{0, 443, 8443} {
		c := goldenCases[0]
		c.cluster = func(cl *clusterv1.Cluster) { cl.Spec.ClusterNetwork.APIServerPort = port }
		objs, err := Exposure{}.Render(c.input(t))
		require.NoError(t, err)
		ports := map[int32]bool{}
		for _, o := range objs {
			if svc, ok := o.(*corev1.Service); ok {
				for _, p := range svc.Spec.Ports {
					ports[p.Port] = true
				}
			}
		}
		routes := 0
		for _, o := range objs {
			if route, ok := o.(*gatewayv1.TLSRoute); ok {
				routes++
				backend := *route.Spec.Rules[0].BackendRefs[0].Port
				assert.True(t, ports[backend], "apiServerPort %d: TLSRoute %s leads to port %d, which the Service has not (%v)", port, route.Name, backend, ports)
			}
		}
		assert.Equal(t, 3, routes, "the API server's, konnectivity's and the tunnel's")
	}
}
