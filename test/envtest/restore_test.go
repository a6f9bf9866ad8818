package envtest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// exposed serves a control plane at an endpoint of its own, so that its
// certificates follow at once.
func exposed(h *v1alpha1.HostedControlPlane) {
	h.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureClusterIP}
	h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 1}
}

// What the README says of a restore: the CAs and the service account key
// are Secrets of the management cluster, deleted with the control plane,
// and kept when the user kept them and creates them again (as `kubectl get
// secret -o yaml` shows them) before a new control plane of the same name:
// cert-manager keeps them rather than issuing new ones.
func TestKeptCASecretsAreKept(t *testing.T) {
	parallel(t)
	ctx := testContext(t)
	ns := namespace(t)
	cluster := newCluster(t, ns, "kept", 0)
	hcp := newControlPlane(t, cluster, exposed)
	waitCondition(t, hcp, v1alpha1.CertificatesReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	names := []string{"kept-ca", "kept-etcd", "kept-proxy", "kept-sa"}
	kept := map[string]*corev1.Secret{}
	for _, name := range names {
		s := get(t, &corev1.Secret{}, ns, name)
		kept[name] = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: s.Labels, Annotations: s.Annotations},
			Type:       s.Type, Data: s.Data,
		}
	}

	require.NoError(t, env.Client.Delete(ctx, hcp))
	waitFor(t, "the control plane and its CA Secrets are gone", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(hcp), &v1alpha1.HostedControlPlane{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("control plane still there: %w", err)
		}
		for _, name := range names {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("secret %s still there: %w", name, err)
			}
		}
		return nil
	})

	// envtest runs no garbage collector, which would remove what the old
	// control plane owned: the new one goes in a namespace of its own.
	ns = namespace(t)
	for _, name := range names {
		kept[name].Namespace = ns
		require.NoError(t, env.Client.Create(ctx, kept[name]))
	}
	hcp = newControlPlane(t, newCluster(t, ns, "kept", 0), exposed)
	waitCondition(t, hcp, v1alpha1.CertificatesReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	for _, name := range names {
		s := get(t, &corev1.Secret{}, ns, name)
		assert.Equal(t, kept[name].Data[corev1.TLSCertKey], s.Data[corev1.TLSCertKey], "%s keeps its certificate", name)
		assert.Equal(t, kept[name].Data[corev1.TLSPrivateKeyKey], s.Data[corev1.TLSPrivateKeyKey], "%s keeps its key", name)
	}
}
