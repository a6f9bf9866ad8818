package render

import (
	"bytes"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Authority is a certificate authority the control plane rotates by itself
// (etcd's, the front proxy's): where it is kept, and what a rotation of it
// under way renders (see internal/rotation). Its certificates are issued by
// Issuer, and what verifies them trusts Bundle while Bundled, otherwise
// the ca.crt cert-manager writes beside each certificate it issues.
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

	status   v1alpha1.CertificateAuthorityStatus
	observed map[string]AuthoritySecret
	caCerts  map[string][]byte
}

// AuthoritySecret is what the Secret of a certificate authority holds, as
// far as rendering needs it beside its ca.crt (Observed.CACerts): never the
// private key, only its digest.
type AuthoritySecret struct {
	// SelfSigned tells that its certificate is its anchor.
	SelfSigned bool
	// Key digests its private key; CertKey digests the public key of its
	// certificate (contract.Digest of the DER encodings).
	Key, CertKey string
}

// EtcdCA is the CA of etcd.
func (in Input) EtcdCA() Authority {
	return in.authority(v1alpha1.RotateEtcdCA, in.EtcdCASecret(), contract.EtcdTrustSecretName(in.ClusterName()), "etcd-ca",
		in.ControlPlane.Status.CertificateAuthorities.Etcd)
}

// FrontProxyCA is the CA of the front proxy's client certificate.
func (in Input) FrontProxyCA() Authority {
	return in.authority(v1alpha1.RotateFrontProxyCA, in.FrontProxyCASecret(), in.Name("proxy-trust"), "front-proxy-ca",
		in.ControlPlane.Status.CertificateAuthorities.FrontProxy)
}

// Authorities are the certificate authorities the control plane rotates.
func (in Input) Authorities() []Authority { return []Authority{in.EtcdCA(), in.FrontProxyCA()} }

func (in Input) authority(key, secret, trust, commonName string, status v1alpha1.CertificateAuthorityStatus) Authority {
	return Authority{
		Key: key, Secret: secret, Next: secret + "-next", Trust: trust, CommonName: commonName,
		status: status, observed: in.AuthoritySecrets, caCerts: in.CACerts,
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
	return a.status.RotatedAt != nil || a.phase() == v1alpha1.DroppingOldCA
}

// Issuer is the Issuer of the certificates of the CA: the new CA's from
// IssuingFromNewCA until the new CA is in the CA's Secret.
func (a Authority) Issuer() string {
	switch a.phase() {
	case v1alpha1.IssuingFromNewCA:
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
	p := a.phase()
	return p == v1alpha1.TrustingNewCA || p == v1alpha1.IssuingFromNewCA
}

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
	anchor := a.caCerts[a.Issuer()]
	if len(anchor) == 0 {
		return false
	}
	for _, name := range secrets {
		if !bytes.Equal(a.caCerts[name], anchor) {
			return false
		}
	}
	return true
}
