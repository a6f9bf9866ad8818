package components

import (
	"context"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/test/pkitest"
)

// The certificates wait while one of them holds, as ca.crt, an earlier
// certificate of its CA's key than the CA's Secret does (cert-manager
// renewed the CA, or issued it twice when the control plane was created):
// its pods would roll at its renewal otherwise. Issued again with the CA
// as its Secret holds it, they are ready.
func TestPKIWaitsForSupersededCertificates(t *testing.T) {
	first, err := pkitest.NewCA("kubernetes")
	require.NoError(t, err)
	second, err := first.Renewed()
	require.NoError(t, err)
	in := goldenCase{}.input(t)
	objs, err := PKI{}.Render(in)
	require.NoError(t, err)
	scheme := runtime.NewScheme()
	require.NoError(t, cmv1.AddToScheme(scheme))
	reader := fake.NewClientBuilder().WithScheme(scheme)
	in.SecretDigests, in.CACerts = map[string]string{}, map[string][]byte{}
	for _, obj := range objs {
		cert, ok := obj.(*cmv1.Certificate)
		if !ok {
			continue
		}
		cert = cert.DeepCopy()
		cert.Status.Conditions = []cmv1.CertificateCondition{{Type: cmv1.CertificateConditionReady, Status: cmmeta.ConditionTrue}}
		reader = reader.WithObjects(cert)
		in.SecretDigests[cert.Spec.SecretName] = "issued"
		in.CACerts[cert.Spec.SecretName] = second.CertPEM()
	}
	c := reader.Build()
	ready := func() readiness.Outcome {
		out, err := PKI{}.Ready(context.Background(), c, in, readiness.Applied{Objects: objs})
		require.NoError(t, err)
		return out
	}
	require.True(t, ready().Done, "every certificate of the CA as its Secret holds it")

	in.CACerts["demo-apiserver"] = first.CertPEM()
	out := ready()
	assert.False(t, out.Done)
	assert.Equal(t, v1alpha1.IssuingReason, out.Reason)
	assert.Equal(t, "waiting for cert-manager to issue again the certificates signed while their CA's Secret held an earlier "+
		"certificate of the same key: demo-apiserver", out.Message)
	assert.Equal(t, []string{"demo-apiserver"}, SupersededCertificates(in))
}
