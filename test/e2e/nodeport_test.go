package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/local"
)

// A control plane exposed through a NodePort Service without a host of the
// user's becomes Available at the node's address and the node port the
// Service was given, and its kubeconfig reaches the API server there from
// the host. With spec.managementServiceAccounts, a service account of the
// management cluster reaches it with a token the management cluster
// issued for the control plane's audience, under the fixed prefix, and a
// token for another audience is refused (the Cluster has a service domain
// of its own: the management cluster's issuer is
// https://kubernetes.default.svc.cluster.local, which the API servers
// would otherwise take for their own).
func TestNodePortExposure(t *testing.T) {
	parallel(t)
	ns := namespace(t, "nodeport")
	manifest := strings.Replace(hostedCluster("nodeport", images.KubeVersion, 1, 1),
		"services: {cidrBlocks: [10.128.0.0/16]}", "services: {cidrBlocks: [10.128.0.0/16]}\n    serviceDomain: nodeport.local", 1)
	apply(t, ns, manifest+"  exposure: {type: NodePort}\n  managementServiceAccounts: {}\n")
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

	t.Run("a service account of the management cluster reaches the API server with its own token", func(t *testing.T) {
		ctx := testContext(t)
		require.NoError(t, k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "automation", Labels: map[string]string{userInput: "true"},
		}}))
		token := func(audience string) string {
			req, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "automation", &authenticationv1.TokenRequest{
				Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600)},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			return req.Status.Token
		}
		accepted := token(contract.ManagementAudience(ns, "nodeport"))
		eventually(t, 2*time.Minute, "the management cluster's token accepted", func() error {
			user, err := whoAmI(t, cfg, accepted)
			if err != nil {
				return err
			}
			if want := contract.ManagementUserPrefix + "system:serviceaccount:" + ns + ":automation"; user.Username != want {
				return fmt.Errorf("user %q, want %q", user.Username, want)
			}
			return nil
		})
		_, err := whoAmI(t, cfg, token(contract.ManagementAudience(ns, "another")))
		assert.True(t, apierrors.IsUnauthorized(err), "a token for another control plane's audience is refused: %v", err)
	})

	deleteClusters(t, key)
}
