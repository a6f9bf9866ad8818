package envtest

import (
	"fmt"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// A LoadBalancer that reports a hostname and no address (as AWS's do) gives
// the workload cluster a kubernetes Service all the same: its EndpointSlice
// and Endpoints hold the node-local address and the kas-tunnel DaemonSet forwards it to
// the load balancer's name, as it is, without gateway mode's outer TLS. No
// cloud load balancer runs here: the test writes the Service's status as
// one would, with the name localhost, which leads to the real hosted API
// server the test runs, so the controller's ClusterCache reaches the
// workload cluster through it too.
func TestKubernetesServiceBehindALoadBalancerName(t *testing.T) {
	hosted(t)
	ns, name, port := namespace(t), "lbname", freePort(t)
	cluster := newCluster(t, ns, name, int32(port))
	hcp := newControlPlane(t, cluster, nil)
	svc := get(t, &corev1.Service{}, ns, name+"-apiserver")
	assert.Equal(t, corev1.ServiceTypeLoadBalancer, svc.Spec.Type)
	setStatus(t, svc, func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "localhost"}}
	})
	waitCondition(t, hcp, v1alpha1.KubeconfigReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	rollOutStatefulSet(t, ns, name+"-etcd")
	rollOutDeployment(t, ns, name+"-apiserver")
	rollOutDeployment(t, ns, name+"-controller-manager")
	rollOutDeployment(t, ns, name+"-scheduler")
	runHostedAPIServer(t, ns, name, port)
	runningPod(t, hcp, name+"-apiserver-a", hcp.Spec.Version)
	waitCondition(t, hcp, v1alpha1.AvailableCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	setStatus(t, cluster, func(c *clusterv1.Cluster) { c.Status.Initialization.InfrastructureProvisioned = ptr.To(true) })

	workload, err := client.New(workloadConfig(t, ns, name), client.Options{Scheme: Scheme()})
	require.NoError(t, err)
	ds := &appsv1.DaemonSet{}
	tunnel := client.ObjectKey{Namespace: "kube-system", Name: components.KubernetesTunnelName}
	waitFor(t, "the kas-tunnel DaemonSet in the workload cluster", func() error { return workload.Get(testContext(t), tunnel, ds) })
	// The workload cluster's DaemonSet controller, which does not run here.
	require.NoError(t, RollOutDaemonSet(testContext(t), workload, tunnel))
	c := waitCondition(t, hcp, v1alpha1.KubernetesServiceReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	assert.Contains(t, c.Message, fmt.Sprintf("EndpointSlice default/kubernetes leads the kubernetes Service to %s:%d", contract.NodeLocalAddress, contract.NodeTunnelPort))
	assert.Contains(t, c.Message, "DaemonSet kube-system/"+components.KubernetesTunnelName)

	slice := &discoveryv1.EndpointSlice{}
	require.NoError(t, workload.Get(testContext(t), client.ObjectKey{Namespace: "default", Name: "kubernetes"}, slice))
	assert.Equal(t, []string{contract.NodeLocalAddress}, slice.Endpoints[0].Addresses)
	// Its Endpoints too, which clients of the older API (and the conformance
	// test of kubernetes.default) read; not mirrored into a second slice.
	endpoints := &corev1.Endpoints{} //nolint:staticcheck // the deprecated API is what is checked
	require.NoError(t, workload.Get(testContext(t), client.ObjectKey{Namespace: "default", Name: "kubernetes"}, endpoints))
	require.Len(t, endpoints.Subsets, 1)
	assert.Equal(t, contract.NodeLocalAddress, endpoints.Subsets[0].Addresses[0].IP)
	assert.Equal(t, int32(contract.NodeTunnelPort), endpoints.Subsets[0].Ports[0].Port)
	assert.Equal(t, "true", endpoints.Labels[discoveryv1.LabelSkipMirror])
	require.NoError(t, workload.Get(testContext(t), tunnel, ds))
	args := ds.Spec.Template.Spec.Containers[0].Args
	assert.Contains(t, args, fmt.Sprintf("--upstream=localhost:%d", port))
	assert.Contains(t, args, "--direct")
	// The API server's certificate holds the node-local address, which pods
	// dial through the Service.
	assert.Contains(t, get(t, &cmv1.Certificate{}, ns, name+"-apiserver").Spec.IPAddresses, contract.NodeLocalAddress)
}
