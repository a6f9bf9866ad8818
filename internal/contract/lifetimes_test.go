package contract

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// Unset lifetimes take the defaults, but a leaf never outlives its
// authorities: with a 48h CA it gets 48h, not a year.
func TestCertificateLifetimes(t *testing.T) {
	assert.Equal(t, Lifetimes{RootCA: 87600 * time.Hour, CA: 43800 * time.Hour, Leaf: 8760 * time.Hour, Kubeconfig: 24 * time.Hour},
		CertificateLifetimes(v1alpha1.CertificatesSpec{}))
	assert.Equal(t, Lifetimes{RootCA: 87600 * time.Hour, CA: 48 * time.Hour, Leaf: 48 * time.Hour, Kubeconfig: 24 * time.Hour},
		CertificateLifetimes(v1alpha1.CertificatesSpec{CACertificateDuration: &metav1.Duration{Duration: 48 * time.Hour}}))
	assert.Equal(t, Lifetimes{RootCA: 87600 * time.Hour, CA: 43800 * time.Hour, Leaf: 2 * time.Hour, Kubeconfig: time.Hour},
		CertificateLifetimes(v1alpha1.CertificatesSpec{
			LeafCertificateDuration: &metav1.Duration{Duration: 2 * time.Hour}, KubeconfigCertificateDuration: &metav1.Duration{Duration: time.Hour},
		}))
}
