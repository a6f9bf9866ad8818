package envtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A CA as users build one with cert-manager: a self-signed Issuer signs a CA
// Certificate, a CA Issuer signs from its Secret, and the leaf it issues
// verifies against the CA, is issued again when its Secret goes, and when its
// spec asks for more.
func TestCertManagerIssuesFromCA(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	caPEM := certificateAuthority(t, ns, "Issuer", "ca")

	start := time.Now()
	mustCreate(t, ns, leafManifest("leaf", "Issuer", "ca", ns))
	crt := waitIssued(t, ns, "leaf", 0)
	t.Logf("cert-manager issued the leaf from the CA Issuer in %s", since(start))
	dnsNames, ips := []string{"leaf.example.com", "leaf." + ns + ".svc"}, []string{"127.0.0.1", "192.0.2.10"}
	first := verifyLeaf(t, secret(t, ns, "leaf"), caPEM, dnsNames, ips)

	t.Run("deleted Secret is issued again", func(t *testing.T) {
		start := time.Now()
		require.NoError(t, env.Client.Delete(testContext(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leaf"}}))
		crt = waitIssued(t, ns, "leaf", *crt.Status.Revision)
		t.Logf("cert-manager issued the leaf again after its Secret was deleted in %s", since(start))
		again := verifyLeaf(t, secret(t, ns, "leaf"), caPEM, dnsNames, ips)
		assert.NotEqual(t, first.SerialNumber, again.SerialNumber, "a new certificate")
	})

	t.Run("changed spec is issued again", func(t *testing.T) {
		start := time.Now()
		// A merge patch: cert-manager writing the status meanwhile is no conflict.
		patch := client.MergeFrom(crt.DeepCopy())
		crt.Spec.DNSNames = append(crt.Spec.DNSNames, "added.example.com")
		require.NoError(t, env.Client.Patch(testContext(t), crt, patch))
		crt = waitIssued(t, ns, "leaf", *crt.Status.Revision)
		t.Logf("cert-manager issued the leaf again after a SAN was added in %s", since(start))
		verifyLeaf(t, secret(t, ns, "leaf"), caPEM, append(dnsNames, "added.example.com"), ips)
	})
}

// ClusterIssuers keep their CA's key pair in CertManagerNamespace and issue
// into any namespace.
func TestCertManagerClusterIssuers(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	// Cluster-wide names: the test namespace's name keeps them apart.
	caPEM := certificateAuthority(t, "", "ClusterIssuer", ns+"-ca")

	start := time.Now()
	mustCreate(t, ns, leafManifest("leaf", "ClusterIssuer", ns+"-ca", ns))
	waitIssued(t, ns, "leaf", 0)
	t.Logf("cert-manager issued the leaf from the CA ClusterIssuer in %s", since(start))
	verifyLeaf(t, secret(t, ns, "leaf"), caPEM, []string{"leaf.example.com", "leaf." + ns + ".svc"}, []string{"127.0.0.1", "192.0.2.10"})
}

// What issuing one leaf Certificate from a CA Issuer takes, from creating
// it to seeing it Ready.
func BenchmarkCertManagerIssue(b *testing.B) {
	ns := namespace(b)
	certificateAuthority(b, ns, "Issuer", "ca")
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("leaf-%d", i)
		mustCreate(b, ns, leafManifest(name, "Issuer", "ca", ns))
		waitIssued(b, ns, name, 0)
	}
}

// certificateAuthority makes a CA issuer of kind ("Issuer" in ns, or
// "ClusterIssuer" with ns "") called name, signed by a self-signed issuer
// of the same kind, and returns the CA certificate in PEM.
func certificateAuthority(t testing.TB, ns, kind, name string) []byte {
	t.Helper()
	caNS := ns
	if kind == "ClusterIssuer" {
		caNS = CertManagerNamespace
	}
	mustCreate(t, ns, fmt.Sprintf(`
apiVersion: cert-manager.io/v1
kind: %s
metadata: {name: %s-selfsigned}
spec: {selfSigned: {}}`, kind, name))
	waitIssuerReady(t, ns, kind, name+"-selfsigned")

	start := time.Now()
	mustCreate(t, caNS, fmt.Sprintf(`
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: %[1]s}
spec:
  isCA: true
  commonName: %[1]s test CA
  secretName: %[1]s
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {kind: %[2]s, name: %[1]s-selfsigned}`, name, kind))
	waitIssued(t, caNS, name, 0)
	t.Logf("cert-manager issued the self-signed CA %s in %s", name, since(start))

	mustCreate(t, ns, fmt.Sprintf(`
apiVersion: cert-manager.io/v1
kind: %s
metadata: {name: %[2]s}
spec: {ca: {secretName: %[2]s}}`, kind, name))
	waitIssuerReady(t, ns, kind, name)
	return secret(t, caNS, name).Data[corev1.TLSCertKey]
}

// leafManifest asks issuer (of kind) for a certificate that serves and
// authenticates clients, with DNS and IP SANs.
func leafManifest(name, kind, issuer, ns string) string {
	return fmt.Sprintf(`
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: %[1]s}
spec:
  secretName: %[1]s
  dnsNames: [leaf.example.com, leaf.%[4]s.svc]
  ipAddresses: [127.0.0.1, 192.0.2.10]
  usages: [digital signature, server auth, client auth]
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {kind: %[2]s, name: %[3]s}`, name, kind, issuer, ns)
}

// verifyLeaf checks what a TLS peer would: the Secret's key pair matches,
// the chain verifies against the CA for every SAN and for client auth, and
// ca.crt is the CA.
func verifyLeaf(t *testing.T, s *corev1.Secret, caPEM []byte, dnsNames, ips []string) *x509.Certificate {
	t.Helper()
	assert.Equal(t, string(caPEM), string(s.Data["ca.crt"]), "ca.crt is the CA")
	pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	require.NoError(t, err, "tls.key belongs to tls.crt")
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM), "the CA is PEM")
	for _, der := range pair.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		require.NoError(t, err)
		intermediates.AddCert(c)
	}
	for _, name := range append(slices.Clone(dnsNames), ips...) {
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, Intermediates: intermediates})
		assert.NoError(t, err, "serving as %s", name)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.NoError(t, err, "as a client certificate")
	assert.ElementsMatch(t, dnsNames, leaf.DNSNames)
	var gotIPs []string
	for _, ip := range leaf.IPAddresses {
		gotIPs = append(gotIPs, ip.String())
	}
	assert.ElementsMatch(t, ips, gotIPs)
	assert.False(t, leaf.IsCA)
	return leaf
}

// waitIssued waits until Certificate ns/name is Ready for its current spec
// with a revision past after, and returns it.
func waitIssued(t testing.TB, ns, name string, after int) *cmv1.Certificate {
	t.Helper()
	crt := &cmv1.Certificate{}
	eventually(t, fmt.Sprintf("Certificate %s/%s issued past revision %d", ns, name, after), func(ctx context.Context) (string, bool) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, crt); err != nil {
			return err.Error(), false
		}
		for _, c := range crt.Status.Conditions {
			if c.Type == cmv1.CertificateConditionReady && c.Status == cmmeta.ConditionTrue &&
				c.ObservedGeneration == crt.Generation && crt.Status.Revision != nil && *crt.Status.Revision > after {
				return "", true
			}
		}
		return fmt.Sprintf("status %+v", crt.Status), false
	})
	return crt
}

// waitIssuerReady waits until the Issuer or ClusterIssuer is Ready.
func waitIssuerReady(t testing.TB, ns, kind, name string) {
	t.Helper()
	var issuer interface {
		client.Object
		GetStatus() *cmv1.IssuerStatus
	} = &cmv1.Issuer{}
	if kind == "ClusterIssuer" {
		issuer = &cmv1.ClusterIssuer{}
	}
	eventually(t, fmt.Sprintf("%s %s Ready", kind, name), func(ctx context.Context) (string, bool) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, issuer); err != nil {
			return err.Error(), false
		}
		for _, c := range issuer.GetStatus().Conditions {
			if c.Type == cmv1.IssuerConditionReady && c.Status == cmmeta.ConditionTrue {
				return "", true
			}
		}
		return fmt.Sprintf("status %+v", *issuer.GetStatus()), false
	})
}

// eventually polls done until it reports true, failing the test with the
// last state it reported if that takes over a minute.
func eventually(t testing.TB, what string, done func(context.Context) (state string, ok bool)) {
	t.Helper()
	var state string
	err := wait.PollUntilContextTimeout(testContext(t), 25*time.Millisecond, time.Minute, true,
		func(ctx context.Context) (bool, error) {
			var ok bool
			state, ok = done(ctx)
			return ok, nil
		})
	require.NoError(t, err, "waiting for %s; last seen: %s", what, state)
}

// mustCreate creates a manifest in ns (cluster-wide with ""). Cluster-wide
// objects and those in CertManagerNamespace are deleted after the test, as
// other tests share them.
func mustCreate(t testing.TB, ns, text string) {
	t.Helper()
	obj, err := create(t, ns, text)
	require.NoError(t, err)
	if ns != "" && ns != CertManagerNamespace {
		return
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := env.Client.Delete(ctx, obj)
		assert.Truef(t, err == nil || apierrors.IsNotFound(err), "delete %s %s: %v", obj.GetKind(), obj.GetName(), err)
		if obj.GetKind() == "Certificate" { // its Secret outlives it
			err = env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: obj.GetName()}})
			assert.Truef(t, err == nil || apierrors.IsNotFound(err), "delete Secret %s: %v", obj.GetName(), err)
		}
	})
}

func secret(t testing.TB, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	require.NoError(t, env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: name}, s))
	return s
}

func since(start time.Time) time.Duration { return time.Since(start).Round(time.Millisecond) }
