package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/local"
)

// A control plane exposed through a NodePort Service without a host of the
// user's becomes Available at the node's address and the node port the
// Service was given, and its kubeconfig reaches the API server there from
// the host.
func TestNodePortExposure(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "nodeport")
	apply(t, ns, hostedCluster("nodeport", images.KubeVersion, 1, 1)+"  exposure: {type: NodePort}\n")
	key := client.ObjectKey{Namespace: ns, Name: "nodeport"}
	require.NoError(t, local.WaitAvailable(testContext(t), k8s, key, 15*time.Minute))

	svc := &corev1.Service{}
	require.NoError(t, k8s.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "nodeport-apiserver"}, svc))
	require.Equal(t, corev1.ServiceTypeNodePort, svc.Spec.Type)
	var nodePort int32
	for _, p := range svc.Spec.Ports {
		if p.Name == "https" {
			nodePort = p.NodePort
		}
	}
	require.NotZero(t, nodePort, "the Service has a node port")

	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(testContext(t), key, hcp))
	assert.Equal(t, cluster.NodeIP, hcp.Spec.ControlPlaneEndpoint.Host, "the node's address")
	assert.Equal(t, nodePort, hcp.Spec.ControlPlaneEndpoint.Port, "the node port the Service was given")

	cfg := hostedConfig(t, ns, "nodeport")
	assert.Equal(t, fmt.Sprintf("https://%s:%d", cluster.NodeIP, nodePort), cfg.Host)
	hosted, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	version, err := hosted.Discovery().ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, images.KubeVersion, version.GitVersion)
	_, err = hosted.CoreV1().ConfigMaps("default").Create(testContext(t), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "through-nodeport"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	deleteClusters(t, key)
}
