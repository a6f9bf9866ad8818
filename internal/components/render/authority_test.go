package render

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// selfSignedCA is a PEM encoded CA certificate of key, with serial.
func selfSignedCA(t *testing.T, key *ecdsa.PrivateKey, serial int64) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// A certificate signed while the CA's Secret held an earlier certificate
// of the same key (cert-manager issued the CA twice) is superseded; one of
// the CA as its Secret holds it, and one of another CA, are not.
func TestSuperseded(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	first, second := selfSignedCA(t, key, 2), selfSignedCA(t, key, 3)
	a := Authority{Secret: "demo-ca", Next: "demo-ca-next", root: true, caCerts: map[string][]byte{
		"demo-ca":      second,
		"demo-admin":   first,
		"demo-sched":   second,
		"demo-other":   selfSignedCA(t, other, 4),
		"demo-nothing": []byte("not a certificate"),
	}}
	assert.Equal(t, []string{"demo-admin"}, a.Superseded([]string{"demo-admin", "demo-sched", "demo-other", "demo-nothing", "demo-missing"}))
	assert.False(t, a.Issued([]string{"demo-admin"}), "not issued by the CA as its Secret holds it")
	assert.Empty(t, Authority{Secret: "demo-ca", caCerts: map[string][]byte{"demo-admin": first}}.Superseded([]string{"demo-admin"}),
		"nothing is superseded while the CA's Secret is not observed")
}

// In a cross-signed rotation Cross issues with the old CA's anchor as
// ca.crt, as the old CA did, so a certificate counts as issued by it only
// once the new CA's key signed it; and only while the rotation issues
// through Cross. What verifies moves to the trust Secret only once the new
// CA is in the CA's Secret, and keeps it after.
func TestCrossIssued(t *testing.T) {
	anchor := []byte("-----OLD ANCHOR-----\n")
	a := Input{}.authority("etcd-ca", "demo-etcd", "demo-etcd-trust", "etcd-ca", v1alpha1.CertificateAuthorityStatus{
		Rotation: &v1alpha1.KeyRotation{Phase: v1alpha1.IssuingFromNewCA, CrossSigned: true},
	})
	a.Cross = "demo-etcd-cross"
	a.caCerts = map[string][]byte{"demo-etcd": anchor, "demo-etcd-cross": anchor, "demo-etcd-server": anchor, "demo-etcd-peer": anchor}
	a.observed = map[string]AuthoritySecret{"demo-etcd-next": {SelfSigned: true, Key: "k2", CertKey: "c2", KeyID: "new"}, "demo-etcd": {Key: "k1", CertKey: "c1"}}
	a.signers = map[string]string{"demo-etcd-server": "new", "demo-etcd-peer": "old"}
	require.True(t, a.CrossIssued())
	assert.Equal(t, "demo-etcd-cross", a.Issuer())
	assert.False(t, a.Bundled(), "nothing trusts a bundle")
	assert.False(t, a.Trusted(), "what verifies keeps the old CA's anchor beside its certificate")
	assert.True(t, a.Issued([]string{"demo-etcd-server"}))
	assert.False(t, a.Issued([]string{"demo-etcd-server", "demo-etcd-peer"}), "the peer certificate is still the old key's")
	a.signers["demo-etcd-peer"] = "new"
	assert.True(t, a.Issued([]string{"demo-etcd-server", "demo-etcd-peer"}))
	unseen := a
	unseen.observed = map[string]AuthoritySecret{}
	assert.False(t, unseen.Issued([]string{"demo-etcd-server"}), "not while the new CA is not observed")

	a.status.Rotation.Phase = v1alpha1.DroppingOldCA
	assert.Equal(t, "demo-etcd-cross", a.Issuer(), "Cross issues until the rotation ends")
	assert.False(t, a.Trusted(), "not before the new CA is in its Secret")
	a.observed["demo-etcd"] = a.observed["demo-etcd-next"]
	a.caCerts["demo-etcd"] = []byte("-----NEW-----\n")
	assert.True(t, a.Trusted(), "the trust Secret, once it holds the new CA")
	assert.Equal(t, "-----NEW-----\n", string(a.TrustBundle()))

	a.status = v1alpha1.CertificateAuthorityStatus{RotatedAt: &metav1.Time{}, TrustSecret: true}
	assert.Equal(t, "demo-etcd", a.Issuer(), "after the rotation, issued from the CA's Secret")
	assert.True(t, a.Trusted(), "and still verified with the trust Secret")

	legacy := Input{}.authority("etcd-ca", "demo-etcd", "demo-etcd-trust", "etcd-ca", v1alpha1.CertificateAuthorityStatus{
		Rotation: &v1alpha1.KeyRotation{Phase: v1alpha1.IssuingFromNewCA},
	})
	legacy.Cross = "demo-etcd-cross"
	assert.False(t, legacy.CrossIssued(), "a rotation an earlier release started ends as it began")
	assert.Equal(t, "demo-etcd-next", legacy.Issuer())
	assert.True(t, legacy.Bundled())
}
