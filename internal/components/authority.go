package components

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// trustedBy is a flag of the API server that names a file of CA
// certificates it verifies a peer with, and the CA whose certificates those
// peers present.
type trustedBy struct {
	flag, volume string
	authority    func(render.Input) render.Authority
}

// apiServerTrust are the API server's flags that trust a CA the control
// plane rotates: etcd's (towards etcd), the front proxy's (for the
// requests extension API servers receive from it, and the certificate of
// the front proxy it publishes in kube-system/extension-apiserver-authentication
// for them) and the cluster CA's (for client certificates).
var apiServerTrust = []trustedBy{
	{flag: "client-ca-file", volume: "cluster-trust", authority: render.Input.ClusterAuthority},
	{flag: "etcd-cafile", volume: "etcd-trust", authority: render.Input.EtcdCA},
	{flag: "requestheader-client-ca-file", volume: "front-proxy-trust", authority: render.Input.FrontProxyCA},
}

// apiServerTrustArgs point the API server at the trust bundle of each CA
// whose rotation needs the old and the new one trusted, or whose own
// certificate's ca.crt is not the CA any more (Trusted), and return the
// volumes they read it from.
func apiServerTrustArgs(in render.Input, flags map[string]string) []render.SecretVolume {
	var vols []render.SecretVolume
	for _, t := range apiServerTrust {
		a := t.authority(in)
		if !a.Trusted() {
			continue
		}
		dir := contract.APIServerPKIDir + "/" + t.volume
		flags[t.flag] = dir + "/" + render.CAKey
		vols = append(vols, render.SecretVolume{Name: t.volume, Secret: a.Trust, Path: dir})
	}
	return vols
}

// trustBundles are the Secrets with the certificates of the old and the new
// CA of each rotation under way, which what verifies its certificates
// trusts while it is Bundled (and which pods of that rendering still mount
// until the rotation ends, so they are kept until then), and the cluster
// CA's once it was rotated (Trusted). The API server's component label
// lets Configs prune them once they are not.
func trustBundles(in render.Input) []*corev1.Secret {
	var out []*corev1.Secret
	for _, a := range in.Authorities() {
		if a.Rotation() == nil && !a.Trusted() {
			continue
		}
		out = append(out, &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: in.Meta(a.Trust, contract.APIServerComponent),
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{render.CAKey: a.TrustBundle()},
		})
	}
	return out
}

// clusterTrust is the cluster CA a kubeconfig or cluster-info carries:
// during a rotation, what the API servers trust (the old and the new CA,
// until DroppingOldCA; the new one after), otherwise outside (the ca.crt
// of a certificate of the cluster CA, or its own certificate). A client
// that kept the old CA alone still verifies the API server through the
// serving chain (see render.Authority.ServingIssuer).
func clusterTrust(in render.Input, outside []byte) []byte {
	a := in.ClusterAuthority()
	if bundle := a.TrustBundle(); a.Rotation() != nil && len(bundle) > 0 {
		return bundle
	}
	return outside
}
