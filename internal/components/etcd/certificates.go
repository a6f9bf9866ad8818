package etcd

import (
	"net"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// ServerSecret is the Secret of the members' serving certificate.
func ServerSecret(in render.Input) string { return in.Name("etcd-server") }

// PeerSecret is the Secret of the certificate members talk to each other
// with.
func PeerSecret(in render.Input) string { return in.Name("etcd-peer") }

// Certificates are etcd's own, signed by the etcd CA (the new one from the
// middle of a rotation on, see render.Authority): the members' serving
// and peer certificates, and the client certificate the extension checks
// etcd's health with (contract.EtcdHealthcheckSecretName).
func (Component) Certificates(in render.Input) []*cmv1.Certificate {
	return []*cmv1.Certificate{
		memberCertificate(in, ServerSecret(in), "etcd-server"),
		memberCertificate(in, PeerSecret(in), "etcd-peer"),
		in.ClientCertificate(contract.EtcdHealthcheckSecretName(in.ClusterName()), in.EtcdCA().Issuer(), "kube-etcd-healthcheck-client"),
	}
}

// memberCertificate is a certificate members use both to serve and to
// connect.
func memberCertificate(in render.Input, secret, commonName string) *cmv1.Certificate {
	c := in.Leaf(secret, in.EtcdCA().Issuer(), commonName, nil,
		cmv1.UsageDigitalSignature, cmv1.UsageKeyEncipherment, cmv1.UsageServerAuth, cmv1.UsageClientAuth)
	c.Spec.DNSNames, c.Spec.IPAddresses = render.SplitSANs(sans(in))
	return c
}

// sans name every member (by wildcard), the client Service (whose name
// every client verifies, see contract.EtcdServerName) and loopback.
func sans(in render.Input) []string {
	ns, peers := in.Namespace(), contract.EtcdPeerServiceName(in.ClusterName())
	return []string{
		"*." + peers + "." + ns + ".svc", "*." + peers, peers + "." + ns + ".svc",
		contract.EtcdName(in.ClusterName()), contract.EtcdServerName(in.ClusterName(), ns),
		"localhost", "127.0.0.1", net.IPv6loopback.String(),
	}
}

// Reloaded: etcd loads its serving and peer certificates at every TLS
// handshake, so renewed ones need no restart (its trusted CA it reads at
// start only).
func (Component) Reloaded(in render.Input) []string {
	return []string{ServerSecret(in), PeerSecret(in)}
}

// trustDir is where members read the trust bundle of a rotation of the
// etcd CA.
const trustDir = "/etc/etcd/pki/trust"

// trustBundle points the members at the etcd CA's trust Secret, for
// clients and peers alike, while render.Authority's Trusted: the bundle of
// the old and the new CA during a rotation that needs both trusted, the CA
// of <cluster>-etcd once a cross-signed rotation put the new CA there. It
// returns its volume. Otherwise they trust the ca.crt beside their serving
// and peer certificates.
func trustBundle(in render.Input, flags map[string]string) []render.SecretVolume {
	a := in.EtcdCA()
	if !a.Trusted() {
		return nil
	}
	for _, flag := range trustFlags {
		flags[flag] = trustDir + "/" + render.CAKey
	}
	return []render.SecretVolume{{Name: "trust", Secret: a.Trust, Path: trustDir}}
}

// trustFlags are the members' flags that name the CA certificates they
// verify clients and peers with.
var trustFlags = []string{"trusted-ca-file", "peer-trusted-ca-file"}
