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
