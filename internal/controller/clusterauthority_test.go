package controller

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
)

// A certificate the new cluster CA issues, presented with the new CA
// cross-signed by the old one, verifies against either root: a kubelet that
// joined with the old CA alone keeps trusting the API server.
func TestCrossCertificate(t *testing.T) {
	oldCert, oldKey := testRoot(t, 1)
	newCert, newKey := testRoot(t, 2)
	oldKeyDER, err := x509.MarshalECPrivateKey(oldKey)
	require.NoError(t, err)
	crossPEM, err := crossCertificate(pemOf(newCert.Raw), pemOf(oldCert.Raw), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: oldKeyDER}))
	require.NoError(t, err)
	cross, err := parseCertificate(crossPEM)
	require.NoError(t, err)
	assert.True(t, signedBy(crossPEM, pemOf(oldCert.Raw)))
	assert.False(t, signedBy(crossPEM, pemOf(newCert.Raw)))
	assert.Equal(t, newCert.RawSubject, cross.RawSubject)
	assert.False(t, cross.NotAfter.After(oldCert.NotAfter), "valid no longer than the old CA")

	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "kube-apiserver"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, cross, &leafKey.PublicKey, newKey)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	intermediates := x509.NewCertPool()
	intermediates.AddCert(cross)
	for name, root := range map[string]*x509.Certificate{"old": oldCert, "new": newCert} {
		roots := x509.NewCertPool()
		roots.AddCert(root)
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, DNSName: "localhost"})
		assert.NoError(t, err, "verified by the %s CA alone", name)
	}
	stranger, _ := testRoot(t, 4)
	roots := x509.NewCertPool()
	roots.AddCert(stranger)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, DNSName: "localhost"})
	assert.Error(t, err)
}

// testRoot is a self-signed CA named kubernetes, as cert-manager issues the
// cluster CA.
func testRoot(t *testing.T, serial int64) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Duration(serial) * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert, key
}

func pemOf(der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}) }

// A node counts as renewed when a kubelet client request of the workload
// cluster carries a certificate the new CA signed for it, whether its
// kubelet renewed or joined; certificates of the old CA, of another user,
// or not issued yet do not count.
func TestKubeletsIssuedBy(t *testing.T) {
	oldCert, oldKey := testRoot(t, 1)
	newCert, newKey := testRoot(t, 2)
	issued := func(cn string, orgs []string, ca *x509.Certificate, key *ecdsa.PrivateKey) certificatesv1.CertificateSigningRequest {
		leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
			SerialNumber: big.NewInt(5), Subject: pkix.Name{CommonName: cn, Organization: orgs},
			NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, ca, &leafKey.PublicKey, key)
		require.NoError(t, err)
		return certificatesv1.CertificateSigningRequest{Status: certificatesv1.CertificateSigningRequestStatus{Certificate: pemOf(der)}}
	}
	nodes := []string{"system:nodes"}
	csrs := []certificatesv1.CertificateSigningRequest{
		issued("system:node:renewed", nodes, newCert, newKey),
		issued("system:node:old", nodes, oldCert, oldKey),
		issued("system:node:", nodes, newCert, newKey),
		issued("system:node:outsider", []string{"team-a"}, newCert, newKey),
		issued("admin", nodes, newCert, newKey),
		{}, // approved, not issued yet
		issued("system:node:joined", []string{"system:authenticated", "system:nodes"}, newCert, newKey),
	}
	assert.Equal(t, []string{"renewed", "joined"}, kubeletsIssuedBy(csrs, newCert))
	assert.Equal(t, []string{"old"}, kubeletsIssuedBy(csrs, oldCert))
}
