package components

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// A service account key is rotated with overlap (internal/rotation says
// why each phase is safe): the new key, in the Secret <cluster>-sa-next
// while the rotation runs, is first trusted beside the old one, then signs,
// and, once every token the old one signed has expired, replaces it in
// <cluster>-sa, where the key always is outside a rotation.

// ServiceAccountKeys are the Secrets of the keys the API servers verify
// service account tokens with, and the one they and the controller manager
// sign with, in the phase of the rotation under way. In DroppingOldKey the
// old key is dropped only once <cluster>-sa holds the new one (the
// controller copies it there): until then they keep the keys of the phase
// before.
func ServiceAccountKeys(in render.Input) (verify []string, sign string) {
	current, next := in.SASecret(), in.SANextSecret()
	rotation := in.ControlPlane.Status.ServiceAccountKey.Rotation
	switch {
	case rotation == nil:
		return []string{current}, current
	case rotation.Phase == v1alpha1.TrustingNewKey:
		return []string{current, next}, current
	case rotation.Phase == v1alpha1.DroppingOldKey && ServiceAccountKeyReplaced(in):
		return []string{current}, current
	default:
		return []string{current, next}, next
	}
}

// ServiceAccountKeyReplaced tells whether <cluster>-sa holds the key of
// <cluster>-sa-next, as observed: both are digested by their private key
// alone (StartupKeys).
func ServiceAccountKeyReplaced(in render.Input) bool {
	now, next := in.SecretDigests[in.SASecret()], in.SecretDigests[in.SANextSecret()]
	return now != "" && now == next
}

// ServiceAccountFlags are the flags of the service account keys, as the
// API servers' and the controller manager's containers take them in the
// phase of the rotation under way: the controller checks their pods for
// them before a rotation moves on.
func ServiceAccountFlags(in render.Input) (apiServer, controllerManager []string) {
	verify, sign := ServiceAccountKeys(in)
	for _, secret := range verify {
		apiServer = append(apiServer, "--"+saKeyFlag+"="+saKeyFile(in, secret))
	}
	apiServer = append(apiServer, "--"+saSigningFlag+"="+saKeyFile(in, sign))
	return apiServer, []string{"--" + saPrivateKeyFlag + "=" + saKeyFile(in, sign)}
}

// The flags that name service account keys.
const (
	saKeyFlag        = "service-account-key-file"
	saSigningFlag    = "service-account-signing-key-file"
	saPrivateKeyFlag = "service-account-private-key-file"
)

// ServiceAccountKeyFlag tells whether arg names a service account key, as
// ServiceAccountFlags renders it.
func ServiceAccountKeyFlag(arg string) bool {
	for _, f := range []string{saKeyFlag, saSigningFlag, saPrivateKeyFlag} {
		if strings.HasPrefix(arg, "--"+f+"=") {
			return true
		}
	}
	return false
}

// pkiDir is where the API servers and the controller manager mount their
// keys.
const pkiDir = contract.APIServerPKIDir

// saVolume mounts a service account key's Secret under pkiDir.
func saVolume(in render.Input, secret string) render.SecretVolume {
	name := "sa"
	if secret == in.SANextSecret() {
		name = "sa-next"
	}
	return render.SecretVolume{Name: name, Secret: secret, Path: pkiDir + "/" + name}
}

func saKeyFile(in render.Input, secret string) string {
	return saVolume(in, secret).Path + "/" + corev1.TLSPrivateKeyKey
}

// apiServerSAKeys sets the API server's flags of the service account keys
// and returns the volumes of their Secrets.
func apiServerSAKeys(in render.Input, flags map[string][]string) []render.SecretVolume {
	verify, sign := ServiceAccountKeys(in)
	vols := make([]render.SecretVolume, 0, len(verify))
	flags[saKeyFlag] = nil
	for _, secret := range verify {
		flags[saKeyFlag] = append(flags[saKeyFlag], saKeyFile(in, secret))
		vols = append(vols, saVolume(in, secret))
	}
	flags[saSigningFlag] = []string{saKeyFile(in, sign)}
	return vols
}

// DefaultMaxTokenLifetime bounds the lifetime of the service account
// tokens the API servers issue (--service-account-max-token-expiration),
// unless spec.deployment.apiServer.args sets another. A rotation trusts the
// old key this long after the last API server stopped signing with it.
// Tokens the kubelet asks for pods are issued for a year (kube-apiserver's
// --service-account-extend-token-expiration, on by default, and not bound by
// this), but the kubelet replaces them in the pod well before (at 80% of the
// hour it asks for, at most every 24 hours), so once this bound has passed
// every pod reads a token of the new key.
const DefaultMaxTokenLifetime = 24 * time.Hour

// maxTokenLifetimeFlag is the flag of the bound.
const maxTokenLifetimeFlag = "service-account-max-token-expiration"

// MaxTokenLifetime is the longest lifetime the API servers give a service
// account token: what spec.deployment.apiServer.args sets (admission keeps it
// a duration of at least an hour), or DefaultMaxTokenLifetime.
func MaxTokenLifetime(in render.Input) time.Duration {
	for name, value := range in.ControlPlane.Spec.Deployment.APIServer.Args {
		if strings.ReplaceAll(name, "_", "-") != maxTokenLifetimeFlag {
			continue
		}
		if d, err := time.ParseDuration(value); err == nil && d >= time.Hour {
			return d
		}
	}
	return DefaultMaxTokenLifetime
}
