package envtest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// endpointOf waits for the control plane's endpoint and returns it.
func endpointOf(t *testing.T, hcp *v1alpha1.HostedControlPlane) clusterv1.APIEndpoint {
	t.Helper()
	waitFor(t, "spec.controlPlaneEndpoint", func() error {
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp); err != nil {
			return err
		}
		if e := hcp.Spec.ControlPlaneEndpoint; e.Host == "" || e.Port == 0 {
			return fmt.Errorf("endpoint %+v", e)
		}
		return nil
	})
	return hcp.Spec.ControlPlaneEndpoint
}

func nodePort(t *testing.T, ns, name string) int32 {
	t.Helper()
	svc := get(t, &corev1.Service{}, ns, name)
	require.Equal(t, corev1.ServiceTypeNodePort, svc.Spec.Type)
	for _, p := range svc.Spec.Ports {
		if p.Name == "https" {
			return p.NodePort
		}
	}
	t.Fatalf("Service %s has no https port", name)
	return 0
}

// A NodePort control plane is reached at the node port its Service was
// given: on a node's address when the user named no host (waiting, and
// saying so, while no node is ready), or on the user's host and node port.
func TestNodePortEndpoint(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	hcp := newControlPlane(t, newCluster(t, ns, "np", 0), func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort}
	})
	c := waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.EndpointPendingReason)
	assert.Equal(t, "waiting for an address of Service np-apiserver (type NodePort)", c.Message)

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-"}}
	require.NoError(t, env.Client.Create(testContext(t), node))
	t.Cleanup(func() { _ = env.Client.Delete(testContext(t), node) })
	setStatus(t, node, func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.7"}}
	})
	port := nodePort(t, ns, "np-apiserver")
	assert.Equal(t, clusterv1.APIEndpoint{Host: "192.0.2.7", Port: port}, endpointOf(t, hcp))
	c = waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	assert.Equal(t, fmt.Sprintf("served at https://192.0.2.7:%d", port), c.Message)
	assert.Equal(t, port, nodePort(t, ns, "np-apiserver"), "the recorded node port stays the Service's")

	asked := unusedNodePort(t)
	own := newControlPlane(t, newCluster(t, ns, "np-own", 0), func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort}
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "api.example.com", Port: asked}
	})
	waitFor(t, "the node port the user asked for", func() error {
		if p := nodePort(t, ns, "np-own-apiserver"); p != asked {
			return fmt.Errorf("node port %d", p)
		}
		return nil
	})
	assert.Equal(t, clusterv1.APIEndpoint{Host: "api.example.com", Port: asked}, endpointOf(t, own))
}

// unusedNodePort is a port of the API server's node port range that no
// Service holds: the other tests' Services (LoadBalancer ones too) are
// given node ports at random meanwhile, and a port taken is refused.
func unusedNodePort(t *testing.T) int32 {
	t.Helper()
	services := &corev1.ServiceList{}
	require.NoError(t, env.Client.List(testContext(t), services))
	used := map[int32]bool{}
	for _, svc := range services.Items {
		for _, p := range svc.Spec.Ports {
			used[p.NodePort] = true
		}
	}
	for p := int32(31443); p < 32768; p++ {
		if !used[p] {
			return p
		}
	}
	t.Fatal("every node port is taken")
	return 0
}
