package envtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	hcpcontroller "github.com/hostedcp/cluster-api-provider-hosted/internal/controller"
)

// CiliumCRDs are Cilium's cilium.io/v2 CRDs, CiliumNetworkPolicy among
// them, as Cilium's release installs them.
var CiliumCRDs = ModuleCRDs{"github.com/cilium/cilium@v1.20.2", "pkg/k8s/apis/cilium.io/client/crds/v2"}

// Once Cilium's CRDs are installed, every hosted component gets a
// CiliumNetworkPolicy beside its NetworkPolicy (which Cilium enforces too):
// accepted by Cilium's own schema, selecting the component's pods, denying
// the management API server by identity and the metadata addresses. The
// CRDs stay installed for the tests that follow, which is what a cluster
// that runs Cilium looks like.
func TestNetworkPoliciesWithCilium(t *testing.T) {
	parallel(t)
	require.NoError(t, env.InstallCRDs(CiliumCRDs))
	// The controller starts watching the kind once its CRD is established,
	// and passes over every control plane again.
	ns := namespace(t)
	cluster := newCluster(t, ns, "cilium", 0)
	hcp := newControlPlane(t, cluster, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureClusterIP}
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 1}
	})

	checkPolicies(t, ns, "cilium-etcd", "etcd")
	rollOutStatefulSet(t, ns, "cilium-etcd")
	waitCondition(t, hcp, v1alpha1.EtcdReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	checkPolicies(t, ns, "cilium-kube-apiserver", "kube-apiserver")
	rollOutDeployment(t, ns, "cilium-apiserver")
	checkPolicies(t, ns, "cilium-kube-controller-manager", "kube-controller-manager")
	checkPolicies(t, ns, "cilium-kube-scheduler", "kube-scheduler")
}

// checkPolicies checks the NetworkPolicy and the CiliumNetworkPolicy of a
// component.
func checkPolicies(t *testing.T, ns, name, component string) {
	t.Helper()
	np := get(t, &networkingv1.NetworkPolicy{}, ns, name)
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, np.Spec.PolicyTypes,
		"%s: denied both ways but for what it admits", name)
	assert.NotEmpty(t, np.Spec.Egress, "%s reaches at least DNS", name)

	cnp := &unstructured.Unstructured{}
	cnp.SetGroupVersionKind(render.CiliumNetworkPolicyKind)
	get(t, cnp, ns, name)
	selector, _, _ := unstructured.NestedStringMap(cnp.Object, "spec", "endpointSelector", "matchLabels")
	assert.Equal(t, np.Spec.PodSelector.MatchLabels, selector, "%s: the same pods", name)
	assert.Equal(t, component, selector["app.kubernetes.io/name"])
	deny, _, _ := unstructured.NestedSlice(cnp.Object, "spec", "egressDeny")
	assert.Contains(t, deny, map[string]any{"toEntities": []any{"kube-apiserver"}}, "%s never reaches the management API server", name)
	assert.Contains(t, deny, map[string]any{"toCIDR": []any{"169.254.169.254/32", "169.254.170.2/32", "fd00:ec2::254/128"}},
		"%s never reaches a metadata address", name)
	_, hasAllow := cnp.Object["spec"].(map[string]any)["egress"]
	assert.False(t, hasAllow, "%s: the CiliumNetworkPolicy only denies; the NetworkPolicy admits", name)
}

// The management API server's addresses the controller leaves out of hosted
// pods' egress are the kubernetes Service's ClusterIP and its endpoints'.
func TestManagementAPIServerAddresses(t *testing.T) {
	parallel(t)
	got, err := hcpcontroller.ManagementAPIServer(testContext(t), env.Client)
	require.NoError(t, err)
	svc := get(t, &corev1.Service{}, corev1.NamespaceDefault, "kubernetes")
	assert.Contains(t, got, svc.Spec.ClusterIP)
	slices := &discoveryv1.EndpointSliceList{}
	require.NoError(t, env.Client.List(testContext(t), slices, client.InNamespace(corev1.NamespaceDefault),
		client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}))
	require.NotEmpty(t, slices.Items, "the API server publishes its own endpoints")
	for _, e := range slices.Items[0].Endpoints {
		assert.Subset(t, got, e.Addresses)
	}
}
