package controller

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/util/keyutil"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/rotation"
)

// clusterAuthority completes what a pass observed of a rotation of the
// cluster CA (a) beyond what the other CAs need: the certificates Cross
// issues, the other CAs roots of their own before the old cluster CA is
// dropped, and the kubelets' client certificates. It returns what the
// rotation waits for when the phase cannot move on for another reason than
// rolling pods.
func (r *Reconciler) clusterAuthority(ctx context.Context, s *scope, a render.Authority, o *rotation.AuthorityObserved) (string, error) {
	switch a.Rotation().Phase {
	case v1alpha1.IssuingFromNewCA, v1alpha1.WaitingForKubelets:
		o.Rolled = o.Rolled && a.IssuedBy(a.ServingIssuer(), components.CertificatesOf(s.in, a.ServingIssuer()))
		if !o.Rolled {
			return "", nil
		}
		if pending := intermediates(s.hcp); len(pending) > 0 {
			return fmt.Sprintf("every certificate is issued by the new CA; the old one is kept until the %s, which it signed, are roots of their own (their rotations run beside this one)",
				pending), nil
		}
		kubelets, err := r.kubelets(ctx, s, a)
		o.Kubelets = kubelets
		s.connectionFailed = s.connectionFailed || err != nil && connectionFailed(err) // the workload sync asks for a probe
		return "", err
	}
	return "", nil
}

// intermediates are the CAs the cluster CA still signs: never rotated.
func intermediates(hcp *v1alpha1.HostedControlPlane) []string {
	var out []string
	for _, k := range authorityKinds {
		if st := k.status(hcp); k.key != v1alpha1.RotateClusterCA && st.RotatedAt == nil {
			out = append(out, k.title)
		}
	}
	return out
}

// kubelets observes the workload cluster's nodes and which of them a
// kubelet client certificate of the new cluster CA was issued to, in the
// CertificateSigningRequests the workload cluster still keeps (it removes
// one an hour after it was issued; the rotation records what a pass saw).
// The nodes are listed as metadata alone, for a cluster of many.
func (r *Reconciler) kubelets(ctx context.Context, s *scope, a render.Authority) (*rotation.KubeletsObserved, error) {
	next := &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: s.in.Namespace(), Name: a.Next}, next); err != nil {
		return nil, fmt.Errorf("read the new cluster CA in Secret %s: %w", a.Next, err)
	}
	ca, err := parseCertificate(next.Data[corev1.TLSCertKey])
	if err != nil {
		return nil, fmt.Errorf("the new cluster CA in Secret %s: %w", a.Next, err)
	}
	c, err := r.clusters.GetUncachedClient(ctx, client.ObjectKeyFromObject(s.cluster))
	if err != nil {
		return nil, fmt.Errorf("reach the workload cluster to follow its kubelets' certificates: %w", err)
	}
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := c.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("list the workload cluster's nodes: %w", err)
	}
	csrs := &certificatesv1.CertificateSigningRequestList{}
	if err := c.List(ctx, csrs, client.MatchingFields{"spec.signerName": certificatesv1.KubeAPIServerClientKubeletSignerName}); err != nil {
		return nil, fmt.Errorf("list the workload cluster's kubelet client CertificateSigningRequests: %w", err)
	}
	o := &rotation.KubeletsObserved{Renewed: kubeletsIssuedBy(csrs.Items, ca), Lifetime: components.KubeletCertificateLifetime(s.in)}
	for _, node := range nodes.Items {
		o.Nodes = append(o.Nodes, node.Name)
	}
	return o, nil
}

// kubeletsIssuedBy are the nodes to whose kubelet one of csrs issued a
// client certificate that ca signed: the name a node's kubelet
// authenticates as (system:node:<name> in group system:nodes), whether it
// renewed or joined with a bootstrap token. The signature decides, not
// when a request was made: the controller manager may sign with either CA
// while it rolls.
func kubeletsIssuedBy(csrs []certificatesv1.CertificateSigningRequest, ca *x509.Certificate) []string {
	var nodes []string
	for _, csr := range csrs {
		cert, err := parseCertificate(csr.Status.Certificate)
		if err != nil || cert.CheckSignatureFrom(ca) != nil || !slices.Contains(cert.Subject.Organization, user.NodesGroup) {
			continue
		}
		if node, ok := strings.CutPrefix(cert.Subject.CommonName, nodeUserPrefix); ok && node != "" {
			nodes = append(nodes, node)
		}
	}
	return nodes
}

// nodeUserPrefix begins the name a node's kubelet authenticates as.
const nodeUserPrefix = "system:node:"

// crossSign writes Cross: the new CA's key with a certificate of it (the
// new CA's subject, key and key identifier) that the old CA signs, valid no
// longer than either. It tells whether Cross holds that for the new CA of
// this rotation. The certificate is public; the key is the new CA's, kept
// beside it in the same namespace.
//
// Of the cluster CA, Cross's ca.crt is that certificate, and so is the
// ca.crt beside what it issues. Of the etcd CA, Cross carries the old CA's
// chain after it and the old CA's ca.crt, so the certificates it issues
// present leaf, Cross, old chain, and keep the ca.crt they had: what trusts
// the old CA, at start or after a restart, verifies them.
func (r *Reconciler) crossSign(ctx context.Context, s *scope, k authorityKind, a render.Authority) (bool, error) {
	ns := s.in.Namespace()
	next, old := &corev1.Secret{}, &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: a.Next}, next); err != nil {
		return false, client.IgnoreNotFound(err) // issued soon
	}
	if len(next.Data[corev1.TLSCertKey]) == 0 || len(next.Data[corev1.TLSPrivateKeyKey]) == 0 {
		return false, nil
	}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: a.Secret}, old); err != nil {
		return false, fmt.Errorf("read the %s in Secret %s: %w", k.title, a.Secret, err)
	}
	cross := &corev1.Secret{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: a.Cross}, cross)
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("read Secret %s: %w", a.Cross, err)
	}
	exists := err == nil
	if exists && bytes.Equal(cross.Data[corev1.TLSPrivateKeyKey], next.Data[corev1.TLSPrivateKeyKey]) {
		return signedBy(cross.Data[corev1.TLSCertKey], old.Data[corev1.TLSCertKey]), nil
	}
	certPEM, err := crossCertificate(next.Data[corev1.TLSCertKey], old.Data[corev1.TLSCertKey], old.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return false, fmt.Errorf("cross-sign the new %s of Secret %s with the old one: %w", k.title, a.Next, err)
	}
	data := map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: next.Data[corev1.TLSPrivateKeyKey], render.CAKey: certPEM}
	if !a.Root() {
		data[corev1.TLSCertKey] = slices.Concat(certPEM, old.Data[corev1.TLSCertKey])
		data[render.CAKey] = old.Data[render.CAKey]
	}
	if !exists {
		cross = &corev1.Secret{ObjectMeta: s.in.Meta(a.Cross, ""), Type: corev1.SecretTypeTLS, Data: data}
		if err := r.client.Create(ctx, cross); err != nil {
			return false, fmt.Errorf("write Secret %s: %w", a.Cross, err)
		}
	} else {
		patch := client.MergeFromWithOptions(cross.DeepCopy(), client.MergeFromWithOptimisticLock{})
		cross.Data = data
		if err := r.client.Patch(ctx, cross, patch); err != nil {
			return false, fmt.Errorf("write Secret %s: %w", a.Cross, err)
		}
	}
	r.recorder.Eventf(s.hcp, cross, corev1.EventTypeNormal, string(v1alpha1.TrustingNewCA), "RotateCA",
		"wrote Secret %s: the new %s's key, with a certificate of it the old CA signed, which the certificates it issues will present", k.title, a.Cross)
	return false, nil // observed by a later pass
}

// crossCertificate is a certificate of the CA whose certificate is nextPEM
// (its subject, key and key identifier), signed by the CA of oldPEM and
// oldKeyPEM, PEM encoded.
func crossCertificate(nextPEM, oldPEM, oldKeyPEM []byte) ([]byte, error) {
	next, err := parseCertificate(nextPEM)
	if err != nil {
		return nil, fmt.Errorf("the new CA: %w", err)
	}
	old, err := parseCertificate(oldPEM)
	if err != nil {
		return nil, fmt.Errorf("the old CA: %w", err)
	}
	parsed, err := keyutil.ParsePrivateKeyPEM(oldKeyPEM)
	if err != nil {
		return nil, errors.New("the old CA's key does not parse")
	}
	key, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, errors.New("the old CA's key cannot sign")
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	notAfter := next.NotAfter
	if old.NotAfter.Before(notAfter) {
		notAfter = old.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, RawSubject: next.RawSubject, SubjectKeyId: next.SubjectKeyId,
		NotBefore: next.NotBefore, NotAfter: notAfter,
		KeyUsage: next.KeyUsage, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, old, next.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// signedBy tells whether the certificate of certPEM is signed by the key of
// the certificate of issuerPEM.
func signedBy(certPEM, issuerPEM []byte) bool {
	cert, err := parseCertificate(certPEM)
	if err != nil {
		return false
	}
	issuer, err := parseCertificate(issuerPEM)
	return err == nil && cert.CheckSignatureFrom(issuer) == nil
}

// parseCertificate parses the first PEM block of data as a certificate.
func parseCertificate(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}
