package images

import "strings"

// The versions the local management cluster runs. Each Go module under hack/
// pins the matching release; a test checks they agree.
const (
	// KubeVersion is the Kubernetes release of the management cluster and of
	// hosted control planes by default (hack/kube).
	KubeVersion = "v1.36.3"
	// PreviousKubeVersion is the patch release before KubeVersion, the
	// starting point of the patch-upgrade test (hack/kube-v1.36.2).
	PreviousKubeVersion = "v1.36.2"
	// EtcdVersion is the etcd release hack/kube builds, and EtcdTag its
	// image tag, as kubeadm names it for KubeVersion.
	EtcdVersion = "v3.6.8"
	EtcdTag     = "3.6.8-0"
	// CoreDNSVersion is the CoreDNS release kubeadm deploys with
	// KubeVersion (hack/coredns).
	CoreDNSVersion = "v1.14.2"
	// KonnectivityVersion is the apiserver-network-proxy release of
	// KubeVersion's minor (hack/konnectivity).
	KonnectivityVersion = "v0.36.0"
	// PauseVersion is the sandbox image version of KubeVersion, compiled
	// from that release's build/pause/linux/pause.c.
	PauseVersion = "3.10.2"
	// CAPIVersion is the Cluster API core manager release (hack/capi).
	CAPIVersion = "v1.14.2"
	// TraefikVersion is the Traefik release that serves as the management
	// cluster's Gateway API implementation (hack/traefik): it implements
	// Gateway API v1.6 with TLSRoute v1 and TLS passthrough.
	TraefikVersion = "v3.7.13"
	// KubeRouterVersion is the kube-router release whose network policy
	// controller enforces NetworkPolicies in the management cluster
	// (hack/kube-router): the newest the module proxy serves.
	KubeRouterVersion = "v2.1.0"
	// CertManagerVersion is the cert-manager release this module's
	// tools/localcluster/cmd/cert-manager runs the controllers and cainjector of.
	CertManagerVersion = "v1.21.2"
	// BusyBoxVersion is the BusyBox release of the conformance suite's
	// busybox image, built from the source package of Debian BusyBoxSuite.
	BusyBoxVersion = "1.37.0"
	BusyBoxSuite   = "trixie"
	// DevTag tags the images of this repository's own binaries, as
	// config/ names them.
	DevTag = "dev"
)

// minor is the minor number of a version such as v1.36.3.
func minor(version string) string { return strings.Split(version, ".")[1] }
