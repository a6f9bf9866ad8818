package contract

import (
	"time"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// Defaults and bounds of the certificates' lifetimes (spec.certificates),
// which admission checks and rendering applies.
const (
	DefaultRootCADuration     = 10 * 365 * 24 * time.Hour
	DefaultCADuration         = 5 * 365 * 24 * time.Hour
	DefaultLeafDuration       = 365 * 24 * time.Hour
	DefaultKubeconfigDuration = 24 * time.Hour

	// MinCADuration leaves an authority room to sign leaves that renew.
	MinCADuration = 24 * time.Hour
	// MinLeafDuration is cert-manager's shortest lifetime (it renews a
	// third of the way before the end, so at least every 40 minutes).
	MinLeafDuration = time.Hour
	// MaxLeafDuration is what kubeadm gives leaves: a leaked key is good
	// for a year at most.
	MaxLeafDuration = 365 * 24 * time.Hour
)

// Lifetimes are the durations the control plane's certificates are issued
// with.
type Lifetimes struct {
	// RootCA is the cluster CA's, CA the etcd and front-proxy CAs'.
	RootCA, CA time.Duration
	// Leaf is every other certificate's but the admin's (Kubeconfig).
	Leaf, Kubeconfig time.Duration
}

// CertificateLifetimes are spec's lifetimes, defaulted. A leaf never
// outlives the authorities: without a lifetime set, it gets the shortest of
// theirs when that is below the default (admission refuses a longer one
// set).
func CertificateLifetimes(spec v1alpha1.CertificatesSpec) Lifetimes {
	l := Lifetimes{RootCA: DefaultRootCADuration, CA: DefaultCADuration, Leaf: DefaultLeafDuration, Kubeconfig: DefaultKubeconfigDuration}
	if d := spec.RootCACertificateDuration; d != nil {
		l.RootCA = d.Duration
	}
	if d := spec.CACertificateDuration; d != nil {
		l.CA = d.Duration
	}
	if d := spec.LeafCertificateDuration; d != nil {
		l.Leaf = d.Duration
	} else {
		l.Leaf = min(l.Leaf, l.CA, l.RootCA)
	}
	if d := spec.KubeconfigCertificateDuration; d != nil {
		l.Kubeconfig = d.Duration
	}
	return l
}
