package components

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/utils/ptr"

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
