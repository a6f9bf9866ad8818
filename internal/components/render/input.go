package render

import (
	"errors"
	"fmt"
	"net"

	"github.com/blang/semver/v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilsnet "k8s.io/utils/net"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Settings are the controller's own choices that shape what it renders.
type Settings struct {
	// Registry is where default images come from, such as registry.k8s.io.
	Registry string
	// ClusterDomain is the workload cluster's DNS domain unless the Cluster
	// sets one, such as cluster.local.
	ClusterDomain string
	// ControllerNamespace is where the controller and the extension run;
	// network policies let them reach etcd.
	ControllerNamespace string
	// TunnelImage is the image of cmd/tunnel, which carries the workload
	// cluster's kubernetes Service to its API server in gateway mode.
	TunnelImage string
	// EtcdRestoreImage is the image of cmd/etcd-restore, which restores an
	// etcd member from a snapshot before it starts.
	EtcdRestoreImage string
	// ManagementAPIServer are the addresses of the management cluster's API
	// server that the controller found when it started (the kubernetes
	// Service's ClusterIPs and its endpoints): hosted pods' egress policies
	// leave them out.
	ManagementAPIServer []string
}

// DefaultSettings are the settings of a controller started without flags.
func DefaultSettings() Settings {
	return Settings{
		Registry: contract.DefaultRegistry, ClusterDomain: "cluster.local", TunnelImage: contract.DefaultTunnelImage,
		EtcdRestoreImage: contract.DefaultEtcdRestoreImage,
	}
}

// Observed is what the controller read from the clusters before rendering.
// A part it could not read yet is zero, and the components that need it wait.
type Observed struct {
	// Listener is the gateway listener that serves the control plane, when
	// spec.gateway is set.
	Listener *contract.GatewayListener
	// RouteClaims are the TLSRoutes on that listener, not the control
	// plane's own, that claim a hostname of its routes.
	RouteClaims []RouteClaim
	// Endpoint is where the API server is reached from outside: what the
	// user set, completed from the exposure; a part not known yet is empty.
	Endpoint clusterv1.APIEndpoint
	// KonnectivityPort is where agents reach the konnectivity server on its
	// host (see the exposure), once known.
	KonnectivityPort int32
	// SecretDigests are contract.DataDigest of what pods read at start of
	// the Secrets they mount, by Secret name; a pod template carries them,
	// so that new content rolls the pods. Of a Secret whose certificate the
	// pods read again when it changes, that is its CA alone (see
	// components.StartupKeys).
	SecretDigests map[string]string
	// MountDigests are contract.DataDigest of the ConfigMaps and Secrets of
	// spec.deployment.apiServer.mounts, by mount name (that of an optional
	// source that does not exist is empty); the API server pod template
	// carries them, so that new content rolls the API servers.
	MountDigests map[string]string
	// AuditWebhookTokens are the bearer tokens of the audit webhook
	// targets, by index, read from their Secrets where a grant allows it;
	// nil for a target without one.
	AuditWebhookTokens [][]byte
	// ManagementIssuer is the management cluster's service account issuer,
	// read when spec.managementServiceAccounts is set; nil otherwise or
	// until read.
	ManagementIssuer *ManagementIssuer
	// Admin is the admin client certificate the cluster kubeconfig embeds.
	Admin Credentials
	// ClusterCA is the cluster CA certificate (PEM) that joining workers pin.
	ClusterCA []byte
	// AuthoritySecrets are what the Secrets of the certificate authorities
	// the control plane rotates hold (see Authority), by Secret name.
	AuthoritySecrets map[string]AuthoritySecret
	// CACerts are the CA certificates (ca.crt) of the control plane's
	// Secrets that have one, by Secret name: what cert-manager wrote beside
	// each certificate it issued.
	CACerts map[string][]byte
	// Signers are, by Secret name, contract.Digest of the authority key
	// identifier of the certificate each Secret holds (its first in
	// tls.crt): which CA key signed it, whatever chain it carries.
	Signers map[string]string
	// Etcd is the membership of the running etcd; nil before it runs.
	Etcd *EtcdMembership
	// EtcdVolumeCapacity is the smallest capacity a bound volume of an etcd
	// member has; nil before one is bound.
	EtcdVolumeCapacity *resource.Quantity
	// EtcdVolumeRequest is the largest size a claim of an etcd member asks
	// for (what a growth asked of the volumes); nil before one exists.
	EtcdVolumeRequest *resource.Quantity
	// EtcdRestoreID is the restore in place the restore Secret is written
	// for (contract.EtcdRestoreIDKey); empty when there is none.
	EtcdRestoreID string
	// Cilium is whether the management cluster serves Cilium's
	// CiliumNetworkPolicy, which each component then gets beside its
	// NetworkPolicy.
	Cilium bool
	// EtcdStalePods counts, while etcd is restored in place, the etcd pods
	// not started for that restore: they must all be gone before the
	// members start again and restore.
	EtcdStalePods int
}

// ManagementIssuer is what the API server of the management cluster
// serves of its service account issuer.
type ManagementIssuer struct {
	// URL is the issuer, the iss claim of its tokens.
	URL string
	// Algorithms are the signing algorithms its discovery document names.
	Algorithms []string
	// Keys are its public keys, the JSON Web Key Set it serves at
	// /openid/v1/jwks.
	Keys []byte
}

// RouteClaim is a TLSRoute of someone else on the control plane's Gateway
// listener that claims one of its hostnames.
type RouteClaim struct {
	// Route is the route's namespace/name.
	Route    string
	Hostname string
	// Created is when the route was created: the oldest claim of a
	// hostname takes precedence (Gateway API).
	Created metav1.Time
}

// Credentials are a client certificate, its key and the CA that verifies
// the server, PEM encoded, as cert-manager writes them into a Secret
// (tls.crt, tls.key, ca.crt).
type Credentials struct {
	Cert, Key, CA []byte
}

// Input is everything rendering depends on. The same Input always renders
// the same objects, byte for byte. It is a value: components read it, and
// nothing changes it once built. ControlPlane and Cluster are read only.
type Input struct {
	ControlPlane *v1alpha1.HostedControlPlane
	Cluster      *clusterv1.Cluster
	Settings     Settings
	Observed

	version             semver.Version
	kubernetesServiceIP net.IP
	dnsIP               net.IP
}

// ErrUnsupportedNetwork is a Cluster network the control plane cannot
// serve yet.
var ErrUnsupportedNetwork = errors.New("not supported yet")

// NewInput checks what rendering needs from the control plane and its
// Cluster, and prepares it. It has observed nothing yet (see With).
func NewInput(cp *v1alpha1.HostedControlPlane, cluster *clusterv1.Cluster, settings Settings) (Input, error) {
	in := Input{ControlPlane: cp, Cluster: cluster, Settings: settings}
	v, err := v1alpha1.ParseVersion(cp.Spec.Version)
	if err != nil {
		return Input{}, fmt.Errorf("spec.version: %w", err)
	}
	in.version = v
	network := cluster.Spec.ClusterNetwork
	if len(network.Services.CIDRBlocks) > 1 || len(network.Pods.CIDRBlocks) > 1 {
		return Input{}, fmt.Errorf("%w: cluster %s sets two service or pod networks (dual-stack), which the API server, controller manager, CoreDNS and kube-proxy are not given yet; "+
			"set one family in spec.clusterNetwork.services.cidrBlocks and pods.cidrBlocks", ErrUnsupportedNetwork, cluster.Name)
	}
	cidr := in.ServiceCIDR()
	if cidr == "" {
		return Input{}, fmt.Errorf("cluster %s has no spec.clusterNetwork.services.cidrBlocks: set the workload cluster's service network, such as 10.96.0.0/12", cluster.Name)
	}
	_, ipnet, err := net.ParseCIDR(cidr)
	if err != nil {
		return Input{}, fmt.Errorf("cluster %s spec.clusterNetwork.services.cidrBlocks[0] %q: %w", cluster.Name, cidr, err)
	}
	// The first address is the kubernetes Service's, the tenth the cluster
	// DNS's, as kubeadm has it.
	if in.kubernetesServiceIP, err = utilsnet.GetIndexedIP(ipnet, 1); err != nil {
		return Input{}, fmt.Errorf("cluster %s service network %s: %w", cluster.Name, cidr, err)
	}
	if in.dnsIP, err = utilsnet.GetIndexedIP(ipnet, 10); err != nil {
		return Input{}, fmt.Errorf("cluster %s service network %s: %w", cluster.Name, cidr, err)
	}
	return in, nil
}

// With is the Input with what the controller observed.
func (in Input) With(o Observed) Input {
	in.Observed = o
	return in
}

// ClusterName is the name objects derive from.
func (in Input) ClusterName() string { return in.Cluster.Name }

// RestoringEtcd is whether etcd is being restored in place: the API
// servers, controller-manager and scheduler run no pod meanwhile.
func (in Input) RestoringEtcd() bool { return in.ControlPlane.Status.Etcd.Restoring != nil }

// Stoppable is the replicas of a component that stops while etcd is
// restored in place.
func (in Input) Stoppable(replicas int32) int32 {
	if in.RestoringEtcd() {
		return 0
	}
	return replicas
}

// Namespace is where every object of the control plane lives.
func (in Input) Namespace() string { return in.ControlPlane.Namespace }

// Name is the name of an object of the control plane: <cluster>-<suffix>.
func (in Input) Name(suffix string) string { return in.ClusterName() + "-" + suffix }

// Version is spec.version, parsed.
func (in Input) Version() semver.Version { return in.version }

// ServiceCIDR is the first service network of the Cluster; NewInput refuses
// a Cluster without one.
func (in Input) ServiceCIDR() string {
	if blocks := in.Cluster.Spec.ClusterNetwork.Services.CIDRBlocks; len(blocks) > 0 {
		return blocks[0]
	}
	return ""
}

// PodCIDR is the first pod network of the Cluster, if any.
func (in Input) PodCIDR() string {
	if blocks := in.Cluster.Spec.ClusterNetwork.Pods.CIDRBlocks; len(blocks) > 0 {
		return blocks[0]
	}
	return ""
}

// ClusterDomain is the workload cluster's DNS domain.
func (in Input) ClusterDomain() string {
	if d := in.Cluster.Spec.ClusterNetwork.ServiceDomain; d != "" {
		return d
	}
	return in.Settings.ClusterDomain
}

// KubernetesServiceIP is the kubernetes Service's address: the first of the
// service network.
func (in Input) KubernetesServiceIP() net.IP { return in.kubernetesServiceIP }

// DNSIP is the cluster DNS Service's address: the tenth of the service
// network, as kubeadm picks it.
func (in Input) DNSIP() string { return in.dnsIP.String() }

// AddonsVersion is the Kubernetes version the workload cluster's add-ons and
// join configuration follow: the oldest version the API servers run
// (status.versions), so that an upgrade moves them only once the control
// plane has moved; spec.version until an API server reports one.
func (in Input) AddonsVersion() string {
	if v := in.ControlPlane.Status.Versions; len(v) > 0 {
		return v[0].Version
	}
	return in.ControlPlane.Spec.Version
}

// AddonsSemver is AddonsVersion parsed; a version that does not parse (which
// admission prevents) falls back to spec.version, which NewInput checked.
func (in Input) AddonsSemver() semver.Version {
	if v, err := v1alpha1.ParseVersion(in.AddonsVersion()); err == nil {
		return v
	}
	return in.version
}

// CredentialsFrom reads credentials from a Secret's data.
func CredentialsFrom(data map[string][]byte) Credentials {
	return Credentials{Cert: data[corev1.TLSCertKey], Key: data[corev1.TLSPrivateKeyKey], CA: data[CAKey]}
}

// CAKey is where cert-manager puts the issuing CA's certificate.
const CAKey = "ca.crt"

// Missing names the first part the credentials lack, as its Secret key, or
// is empty when they are complete.
func (c Credentials) Missing() string {
	switch {
	case len(c.Cert) == 0:
		return corev1.TLSCertKey
	case len(c.Key) == 0:
		return corev1.TLSPrivateKeyKey
	case len(c.CA) == 0:
		return CAKey
	}
	return ""
}
