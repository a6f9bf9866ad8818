package render

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Authority is a certificate authority the control plane rotates by itself
// (etcd's, the front proxy's, the cluster CA): where it is kept, and what a
// rotation of it under way renders (see internal/rotation). Its
// certificates are issued by Issuer, and what verifies them reads Trust
// while Trusted, otherwise the ca.crt cert-manager writes beside each
// certificate it issues.
type Authority struct {
	// Key is what the rotate annotation calls it.
	Key string
	// Secret holds the CA, by the name Cluster API gives it.
	Secret string
	// Next holds the new CA while a rotation runs.
	Next string
	// Trust holds Bundle while Bundled.
	Trust string
	// CommonName is the common name of its certificate.
	CommonName string
	// Cross holds the new CA's key with a certificate of it the old CA
	// signed, once a rotation has made one: the cluster CA's serving
	// certificates are issued through it ever after (see ServingIssuer),
	// the etcd CA's certificates while a cross-signed rotation runs (see
	// CrossIssued). Empty for the front proxy CA.
	Cross string

	// root: always a root of its own (the cluster CA).
	root bool

	status   v1alpha1.CertificateAuthorityStatus
	observed map[string]AuthoritySecret
	caCerts  map[string][]byte
	signers  map[string]string
}

// AuthoritySecret is what the Secret of a certificate authority holds, as
// far as rendering needs it beside its ca.crt (Observed.CACerts): never the
// private key, only its digest.
type AuthoritySecret struct {
	// SelfSigned tells that its certificate is its anchor.
	SelfSigned bool
	// Key digests its private key; CertKey digests the public key of its
	// certificate (contract.Digest of the DER encodings); KeyID digests
	// its certificate's subject key identifier, which the certificates it
	// signs name (Input.Signers).
	Key, CertKey, KeyID string
}

// EtcdCA is the CA of etcd.
func (in Input) EtcdCA() Authority {
	a := in.authority(v1alpha1.RotateEtcdCA, in.EtcdCASecret(), contract.EtcdTrustSecretName(in.ClusterName()), "etcd-ca",
		in.ControlPlane.Status.CertificateAuthorities.Etcd)
	a.Cross = in.EtcdCASecret() + "-cross"
	return a
}

// FrontProxyCA is the CA of the front proxy's client certificate.
func (in Input) FrontProxyCA() Authority {
	return in.authority(v1alpha1.RotateFrontProxyCA, in.FrontProxyCASecret(), in.Name("proxy-trust"), "front-proxy-ca",
		in.ControlPlane.Status.CertificateAuthorities.FrontProxy)
}

// ClusterAuthority is the cluster CA, a root of its own, which signs the
// certificates of the API server, its clients and the kubelets.
func (in Input) ClusterAuthority() Authority {
	a := in.authority(v1alpha1.RotateClusterCA, in.CASecret(), in.Name("ca-trust"), "kubernetes",
		in.ControlPlane.Status.CertificateAuthorities.Cluster)
	a.Cross, a.root = in.CASecret()+"-cross", true
	return a
}

// Authorities are the certificate authorities the control plane rotates,
// the cluster CA, which signs the others until their first rotation, first.
func (in Input) Authorities() []Authority {
	return []Authority{in.ClusterAuthority(), in.EtcdCA(), in.FrontProxyCA()}
}

func (in Input) authority(key, secret, trust, commonName string, status v1alpha1.CertificateAuthorityStatus) Authority {
	return Authority{
		Key: key, Secret: secret, Next: secret + "-next", Trust: trust, CommonName: commonName,
		status: status, observed: in.AuthoritySecrets, caCerts: in.CACerts, signers: in.Signers,
	}
}

// Rotation is the rotation of the CA under way; nil when none is.
func (a Authority) Rotation() *v1alpha1.KeyRotation { return a.status.Rotation }

// phase is the phase of the rotation under way; empty outside one.
func (a Authority) phase() v1alpha1.RotationPhase {
	if r := a.status.Rotation; r != nil {
		return r.Phase
	}
	return ""
}

// SelfSigned tells whether the CA's Secret holds a root of its own. A CA
// never rotated is signed by the cluster CA, as it always was (so an
// upgrade of the controller reissues nothing); a rotated one is
// self-signed, from the phase that writes the new CA into its Secret on, so
// that what trusts it trusts nothing the cluster CA signs.
func (a Authority) SelfSigned() bool {
	return a.root || a.status.RotatedAt != nil || a.phase() == v1alpha1.DroppingOldCA
}

// Root tells that the CA is the cluster CA, always a root of its own.
func (a Authority) Root() bool { return a.root }

// Issuer is the Issuer of the certificates of the CA: the new CA's from
// IssuingFromNewCA until the new CA is in the CA's Secret; in a
// cross-signed rotation, Cross from IssuingFromNewCA until it ends.
func (a Authority) Issuer() string {
	if a.CrossIssued() {
		switch a.phase() {
		case v1alpha1.IssuingFromNewCA, v1alpha1.DroppingOldCA:
			return a.Cross
		}
		return a.Secret
	}
	switch a.phase() {
	case v1alpha1.IssuingFromNewCA, v1alpha1.WaitingForKubelets:
		return a.Next
	case v1alpha1.DroppingOldCA:
		if !a.Replaced() {
			return a.Next
		}
	}
	return a.Secret
}

// Bundled tells whether what verifies certificates of the CA trusts Bundle:
// while certificates of the old CA and of the new one may both be
// presented. From DroppingOldCA on, every certificate is of the new CA's
// key, and the ca.crt beside each (the new CA's certificate) is trusted
// alone.
func (a Authority) Bundled() bool {
	if a.CrossIssued() {
		return false
	}
	p := a.phase()
	return p == v1alpha1.TrustingNewCA || p == v1alpha1.IssuingFromNewCA || p == v1alpha1.WaitingForKubelets
}

// ServingIssuer is the Issuer of the cluster CA's certificates that
// something in the workload cluster verifies with the CA it was given
// once: the API server's serving certificate and its client certificate
// towards kubelets (which verify both with the ca.crt they joined with,
// read at start), and the serving certificates of konnectivity and the
// tunnel (which agents and nodes verify). From IssuingFromNewCA on they are
// issued by Cross, whose certificate is the new CA's key signed by the old
// CA, and presented with it as intermediate: a verifier that trusts only
// the old CA builds leaf, Cross, old CA; one that trusts the new CA builds
// leaf, new CA. They stay so after the rotation, as long as joined workers
// keep the old CA. Of the other CAs, and before any rotation, it is Issuer.
func (a Authority) ServingIssuer() string {
	if a.crossSigned() {
		return a.Cross
	}
	return a.Issuer()
}

// crossSigned tells whether Cross issues the serving certificates: once
// the new cluster CA issues certificates, and ever after.
func (a Authority) crossSigned() bool {
	switch a.phase() {
	case v1alpha1.IssuingFromNewCA, v1alpha1.WaitingForKubelets, v1alpha1.DroppingOldCA:
		return a.root
	case "":
		return a.root && a.status.RotatedAt != nil
	}
	return false
}

// Trusted tells whether what verifies certificates of the CA reads Trust:
// while Bundled; of the cluster CA, from its first rotation on, since the
// ca.crt beside the API server's own certificate is Cross then; of the etcd
// CA, once a cross-signed rotation has put the new CA into its Secret, and
// ever after (TrustSecret), since the ca.crt beside the certificates Cross
// issues is the old CA's anchor.
func (a Authority) Trusted() bool {
	switch {
	case a.Bundled(), a.status.TrustSecret:
		return true
	case a.root:
		return a.Rotation() != nil || a.status.RotatedAt != nil
	}
	return a.CrossIssued() && a.phase() == v1alpha1.DroppingOldCA && a.Replaced()
}

// TrustBundle is what Trust holds: Bundle while Bundled; of the cluster CA
// otherwise, the anchor of the CA that issues its certificates, the new CA
// alone; of the etcd CA in or after a cross-signed rotation, the anchor of
// the CA in its Secret: the old one until the new one replaces it.
func (a Authority) TrustBundle() []byte {
	switch {
	case a.Bundled():
		return a.Bundle()
	case a.root:
		return a.caCerts[a.Issuer()]
	case a.CrossIssued() || a.status.TrustSecret:
		return a.caCerts[a.Secret]
	}
	return a.Bundle()
}

// CrossIssued tells whether a rotation under way issues the certificates
// of the CA (the etcd CA's) through Cross: the new CA's key with a
// certificate of it the old CA signed, presented with the old CA's chain,
// and with the old CA's anchor as ca.crt. A verifier that trusts the old
// CA builds leaf, Cross, old CA; one that trusts the new CA alone builds
// leaf, new CA. So nothing needs to trust both: what verifies keeps the
// old CA until DroppingOldCA, and rolls once, to trust the new one alone.
func (a Authority) CrossIssued() bool {
	r := a.Rotation()
	return a.RotatesCrossSigned() && r != nil && r.CrossSigned
}

// RotatesCrossSigned tells whether a rotation this release starts issues
// the CA's certificates through Cross until it ends, Cross going with it:
// the etcd CA's. (The cluster CA's Cross issues its serving certificates
// ever after, see ServingIssuer.)
func (a Authority) RotatesCrossSigned() bool { return !a.root && a.Cross != "" }

// CrossSigns tells whether a rotation of the CA writes Cross in
// TrustingNewCA: the cluster CA's always, the etcd CA's when CrossIssued.
func (a Authority) CrossSigns() bool { return a.root || a.CrossIssued() }

// Bundle is what Trust holds during a rotation: the anchor of the CA in
// its Secret (the old one until it is replaced) and the new CA's. Nil
// outside a rotation.
func (a Authority) Bundle() []byte {
	if a.Rotation() == nil {
		return nil
	}
	var out []byte
	for _, name := range []string{a.Secret, a.Next} {
		anchor := a.caCerts[name]
		if len(anchor) > 0 && !bytes.Contains(out, anchor) {
			out = append(out, bytes.TrimSpace(anchor)...)
			out = append(out, '\n')
		}
	}
	return out
}

// Replaced tells whether the CA's Secret holds the new CA's key with a
// self-signed certificate of it: cert-manager keeps a key it finds there
// (rotationPolicy Never) and issues the certificate for it.
func (a Authority) Replaced() bool {
	now, next := a.observed[a.Secret], a.observed[a.Next]
	return now.Key != "" && now.Key == next.Key && now.CertKey == next.CertKey && now.SelfSigned
}

// Issued tells whether the Secrets of the certificates of the CA (secrets)
// hold certificates of Issuer: cert-manager writes, as ca.crt beside each,
// the certificate at the end of the issuing CA's chain, its anchor.
func (a Authority) Issued(secrets []string) bool {
	return a.IssuedBy(a.Issuer(), secrets)
}

// NewAnchor is the new CA's certificate, self-signed (the ca.crt of
// Next), which verifies every certificate the new CA's key signed, with or
// without Cross in its chain; nil until its Secret is observed.
func (a Authority) NewAnchor() []byte { return a.caCerts[a.Next] }

// IssuingFromNew tells whether the rotation under way has every
// certificate of the CA issued again by the new CA while everything trusts
// both (IssuingFromNewCA).
func (a Authority) IssuingFromNew() bool { return a.phase() == v1alpha1.IssuingFromNewCA }

// Superseded are those of secrets (the Secrets of the certificates of the
// CA) that Issuer signed while its Secret held an earlier certificate of
// the same subject and key: cert-manager can issue a CA twice in a moment
// (seen in DroppingOldCA, after the new key was written into the CA's
// Secret, and when a control plane is created under load), and renews it
// with its key kept, and a certificate the CA issuer signed before keeps
// the earlier one as its ca.crt, which the CA's Secret no longer holds.
// Issued never turns true for it, and nothing in cert-manager issues it
// again before its own renewal, which would roll the pods that read its
// ca.crt at start then; so the controller asks for that at once.
func (a Authority) Superseded(secrets []string) []string {
	anchor := a.caCerts[a.Issuer()]
	want, ok := anchorIdentity(anchor)
	if !ok {
		return nil
	}
	var out []string
	for _, name := range secrets {
		held := a.caCerts[name]
		if got, ok := anchorIdentity(held); ok && got == want && !bytes.Equal(held, anchor) {
			out = append(out, name)
		}
	}
	return out
}

// anchorIdentity is the subject and public key of the first certificate of
// a PEM bundle; false when it holds none.
func anchorIdentity(pemBytes []byte) (string, bool) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", false
	}
	return string(cert.RawSubject) + "\x00" + string(cert.RawSubjectPublicKeyInfo), true
}

// IssuedBy tells whether the Secrets of certificates (secrets) hold
// certificates of issuer (see Issued). Of Cross while CrossIssued, whose
// ca.crt is the old CA's anchor as before, the key that signed each
// certificate tells: the new CA's.
func (a Authority) IssuedBy(issuer string, secrets []string) bool {
	anchor := a.caCerts[issuer]
	if len(anchor) == 0 {
		return false
	}
	signer := ""
	if a.CrossIssued() && issuer == a.Cross {
		if signer = a.observed[a.Next].KeyID; signer == "" {
			return false
		}
	}
	for _, name := range secrets {
		if !bytes.Equal(a.caCerts[name], anchor) || signer != "" && a.signers[name] != signer {
			return false
		}
	}
	return true
}
