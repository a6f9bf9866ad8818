package components

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// No hosted pod may reach the management API server or a metadata address:
// every egress rule of every policy is DNS (port 53 only), the control
// plane's own pods, or an address block that leaves out the link-local
// ranges and each management API server address; and every management
// component's pods are selected, both ways.
func TestEgressNeverReachesTheManagementAPIServer(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			c.managementAPIServer = []string{"10.96.0.1", "172.18.0.2", "fd00:10:96::1"}
			in := c.input(t)
			fenced := map[string]bool{}
			for _, obj := range renderAll(t, in) {
				np, ok := obj.(*networkingv1.NetworkPolicy)
				if !ok {
					continue
				}
				fenced[np.Spec.PodSelector.MatchLabels[contract.ComponentLabel]] = true
				assert.ElementsMatch(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, np.Spec.PolicyTypes, np.Name)
				for _, rule := range np.Spec.Egress {
					if len(rule.To) == 0 {
						for _, p := range rule.Ports {
							assert.Equal(t, int32(53), p.Port.IntVal, "%s: a rule to anywhere is DNS only", np.Name)
						}
						continue
					}
					for _, peer := range rule.To {
						switch {
						case peer.PodSelector != nil:
							assert.Nil(t, peer.NamespaceSelector, "%s: only the control plane's own pods", np.Name)
						case peer.IPBlock != nil:
							leavesOut(t, np.Name, peer.IPBlock, "169.254.169.254", "fe80::1", "fd00:ec2::254", "10.96.0.1", "172.18.0.2", "fd00:10:96::1")
						default:
							t.Errorf("%s: egress to %+v", np.Name, peer)
						}
					}
				}
			}
			for _, component := range []string{contract.EtcdComponent, contract.APIServerComponent, contract.ControllerManagerComponent, contract.SchedulerComponent} {
				assert.True(t, fenced[component], "%s has a policy", component)
			}
		})
	}
}

// leavesOut checks that block admits none of addrs of its family.
func leavesOut(t *testing.T, policy string, block *networkingv1.IPBlock, addrs ...string) {
	t.Helper()
	cidr, err := netip.ParsePrefix(block.CIDR)
	require.NoError(t, err)
	for _, a := range addrs {
		addr := netip.MustParseAddr(a)
		if !cidr.Contains(addr) {
			continue
		}
		excepted := false
		for _, e := range block.Except {
			excepted = excepted || netip.MustParsePrefix(e).Contains(addr)
		}
		assert.True(t, excepted, "%s: %s admits %s", policy, block.CIDR, a)
	}
}
