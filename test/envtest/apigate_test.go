package envtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// A client built from a gated kubeconfig reaches the API server with the
// kubeconfig's own credentials until the gate closes, and nothing after.
func TestAPIGateRefusesOnceClosed(t *testing.T) {
	parallel(t)
	gate, err := newAPIGate()
	require.NoError(t, err)
	path, err := gate.kubeconfig(env.Kubeconfig, t.TempDir())
	require.NoError(t, err)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	clients, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx := testContext(t)
	_, err = clients.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err, "an open gate lets requests through")

	gate.close()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gated-"}}
	_, err = clients.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a closed gate refuses: %v", err)
	assert.Contains(t, err.Error(), "the cert-manager controllers in this process have stopped")
}
