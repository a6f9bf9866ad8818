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

	"github.com/cert-manager/cert-manager/pkg/util/pki"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
)

// A cross-signed rotation of the etcd CA writes Cross so that what
// cert-manager's CA issuer signs with it (its own signing code, run here on
// the Secret as its issuer reads one) keeps the ca.crt of the old CA and
// presents a chain that what trusts the old CA alone verifies, as does
// what trusts the new CA alone; a certificate of the old CA is refused by
// the new CA. The controller sees which key signed it (Signers, KeyID).
// Both a first rotation (the old etcd CA an intermediate of the cluster
// CA) and a later one (the old etcd CA a root of its own) are shown.
func TestEtcdCrossSignedChain(t *testing.T) {
	clusterCA, clusterKey := testRoot(t, 1)
	for _, tc := range []struct {
		name string
		// old is the etcd CA before the rotation, with its key, and the
		// anchor its Secret's ca.crt holds.
		old    *x509.Certificate
		oldKey *ecdsa.PrivateKey
		anchor *x509.Certificate
	}{
		{name: "first rotation"},
		{name: "later rotation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "first rotation" {
				tc.old, tc.oldKey = testCA(t, 2, clusterCA, clusterKey)
				tc.anchor = clusterCA
			} else {
				tc.old, tc.oldKey = testCA(t, 2, nil, nil)
				tc.anchor = tc.old
			}
			next, nextKey := testCA(t, 3, nil, nil)
			now := metav1.Now()
			hcp := controlPlane(func(h *v1alpha1.HostedControlPlane) {
				h.Status.CertificateAuthorities.Etcd.Rotation = &v1alpha1.KeyRotation{Phase: v1alpha1.TrustingNewCA, Since: now, StartedAt: now, CrossSigned: true}
			})
			oldSecret := secret("demo-etcd", map[string][]byte{
				corev1.TLSCertKey: pemOf(tc.old.Raw), corev1.TLSPrivateKeyKey: ecKeyPEM(t, tc.oldKey), render.CAKey: pemOf(tc.anchor.Raw),
			})
			nextSecret := secret("demo-etcd-next", map[string][]byte{
				corev1.TLSCertKey: pemOf(next.Raw), corev1.TLSPrivateKeyKey: ecKeyPEM(t, nextKey), render.CAKey: pemOf(next.Raw),
			})
			c := fake.NewClientBuilder().WithScheme(observedKinds()).WithObjects(hcp, oldSecret, nextSecret).Build()
			r := &Reconciler{client: c, apiReader: c, settings: render.DefaultSettings(), recorder: events.NewFakeRecorder(10)}
			s := observedWith(t, c, hcp)
			etcdKind, ok := authorityKindOf(v1alpha1.RotateEtcdCA)
			require.True(t, ok)
			a := s.in.EtcdCA()
			require.True(t, a.CrossIssued())

			crossed, err := r.crossSign(t.Context(), s, etcdKind, a)
			require.NoError(t, err)
			assert.False(t, crossed, "written, observed by a later pass")
			crossed, err = r.crossSign(t.Context(), s, etcdKind, a)
			require.NoError(t, err)
			assert.True(t, crossed)
			cross := &corev1.Secret{}
			require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "demo-etcd-cross"}, cross))
			assert.Equal(t, nextSecret.Data[corev1.TLSPrivateKeyKey], cross.Data[corev1.TLSPrivateKeyKey], "the new CA's key")

			// What cert-manager's CA issuer does with an issuer Secret: its
			// tls.crt chain, then its ca.crt.
			caCerts, err := pki.DecodeX509CertificateChainBytes(cross.Data[corev1.TLSCertKey])
			require.NoError(t, err)
			anchor, err := pki.DecodeX509CertificateBytes(cross.Data[render.CAKey])
			require.NoError(t, err)
			caKey, err := pki.DecodePrivateKeyBytes(cross.Data[corev1.TLSPrivateKeyKey])
			require.NoError(t, err)
			leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			require.NoError(t, err)
			bundle, err := pki.SignCSRTemplate(append(caCerts, anchor), caKey, leafTemplate(&leafKey.PublicKey))
			require.NoError(t, err)
			assert.Equal(t, string(pemOf(tc.anchor.Raw)), string(bundle.CAPEM), "the ca.crt beside it is the old CA's anchor, as before")

			chain, err := pki.DecodeX509CertificateChainBytes(bundle.ChainPEM)
			require.NoError(t, err)
			leaf, intermediates := chain[0], x509.NewCertPool()
			for _, cert := range chain[1:] {
				intermediates.AddCert(cert)
			}
			for name, root := range map[string]*x509.Certificate{"the old CA's anchor": tc.anchor, "the new CA": next} {
				_, err := leaf.Verify(verifyWith(root, intermediates))
				assert.NoError(t, err, "verified by %s alone", name)
			}
			stranger, _ := testRoot(t, 9)
			_, err = leaf.Verify(verifyWith(stranger, intermediates))
			assert.Error(t, err)

			// A certificate of the old CA is refused by the new one.
			oldLeaf, err := pki.SignCSRTemplate([]*x509.Certificate{tc.old, tc.anchor}, tc.oldKey, leafTemplate(&leafKey.PublicKey))
			require.NoError(t, err)
			oldChain, err := pki.DecodeX509CertificateChainBytes(oldLeaf.ChainPEM)
			require.NoError(t, err)
			oldIntermediates := x509.NewCertPool()
			for _, cert := range oldChain[1:] {
				oldIntermediates.AddCert(cert)
			}
			_, err = oldChain[0].Verify(verifyWith(next, oldIntermediates))
			assert.Error(t, err, "the new CA alone refuses a certificate of the old one")

			// The controller tells which key signed each.
			issued, ok := certificateValidity(secret("demo-etcd-server", map[string][]byte{corev1.TLSCertKey: bundle.ChainPEM}))
			require.True(t, ok)
			before, ok := certificateValidity(secret("demo-etcd-server", map[string][]byte{corev1.TLSCertKey: oldLeaf.ChainPEM}))
			require.True(t, ok)
			assert.Equal(t, authoritySecret(nextSecret).KeyID, issued.signer, "signed by the new CA's key")
			assert.NotEqual(t, authoritySecret(nextSecret).KeyID, before.signer)
		})
	}
}

// testCA is a CA named etcd-ca, signed by parent, or self-signed
// when parent is nil.
func testCA(t *testing.T, serial int64, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "etcd-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert, key
}

func ecKeyPEM(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// leafTemplate is an etcd member's certificate, as cert-manager's template
// of one.
func leafTemplate(pub any) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(10), Subject: pkix.Name{CommonName: "etcd-server"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), PublicKey: pub,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
}

func verifyWith(root *x509.Certificate, intermediates *x509.CertPool) x509.VerifyOptions {
	roots := x509.NewCertPool()
	roots.AddCert(root)
	return x509.VerifyOptions{Roots: roots, Intermediates: intermediates, DNSName: "localhost"}
}

// Once a cross-signed rotation of the etcd CA has put the new CA into its
// Secret, etcd's members and the API servers verify with the trust Secret,
// and the pass digests nothing of their etcd certificates' Secrets: so the
// certificates issued from the CA's Secret when the rotation ends (their
// ca.crt the new CA, no longer the old one's anchor) restart nothing. What
// the pass reads of the CAs' Secrets decides that, so it is observed first.
func TestEtcdCertificatesRestartNothingOnceTheNewCAIsTrusted(t *testing.T) {
	next, nextKey := testCA(t, 3, nil, nil)
	ca := map[string][]byte{corev1.TLSCertKey: pemOf(next.Raw), corev1.TLSPrivateKeyKey: ecKeyPEM(t, nextKey), render.CAKey: pemOf(next.Raw)}
	digests := func(rotation *v1alpha1.KeyRotation, leafCA string) map[string]string {
		hcp := controlPlane(func(h *v1alpha1.HostedControlPlane) {
			h.Status.CertificateAuthorities.Etcd = v1alpha1.CertificateAuthorityStatus{Rotation: rotation}
			if rotation == nil {
				h.Status.CertificateAuthorities.Etcd = v1alpha1.CertificateAuthorityStatus{RotatedAt: &metav1.Time{}, TrustSecret: true}
			}
		})
		leaf := map[string][]byte{corev1.TLSCertKey: []byte("leaf"), render.CAKey: []byte(leafCA)}
		s := observed(t, hcp, hcp, secret("demo-etcd", ca), secret("demo-etcd-next", ca),
			secret("demo-etcd-server", leaf), secret("demo-etcd-peer", leaf), secret("demo-apiserver-etcd-client", leaf))
		return s.in.SecretDigests
	}
	now := metav1.Now()
	dropping := &v1alpha1.KeyRotation{Phase: v1alpha1.DroppingOldCA, Since: now, StartedAt: now, CrossSigned: true}
	before, after := digests(dropping, "old anchor"), digests(nil, "new CA")
	for _, name := range []string{"demo-etcd-server", "demo-etcd-peer", "demo-apiserver-etcd-client"} {
		assert.Equal(t, before[name], after[name], "%s: its ca.crt is not read at start", name)
	}
	legacy := &v1alpha1.KeyRotation{Phase: v1alpha1.DroppingOldCA, Since: now, StartedAt: now}
	assert.NotEqual(t, digests(legacy, "old anchor")["demo-etcd-server"], digests(legacy, "new CA")["demo-etcd-server"],
		"in a rotation an earlier release started, the members still read the ca.crt beside their certificates")
}
