package components

import (
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
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
}

// DefaultSettings are the settings of a controller started without flags.
func DefaultSettings() Settings {
	return Settings{Registry: "registry.k8s.io", ClusterDomain: "cluster.local", TunnelImage: contract.DefaultTunnelImage}
}

// Input is everything rendering depends on. The same Input always renders the
// same objects, byte for byte.
type Input struct {
	ControlPlane *v1alpha1.HostedControlPlane
	Cluster      *clusterv1.Cluster
	Settings     Settings
	// Listener is the gateway listener that serves the control plane, when
	// spec.gateway is set.
	Listener *contract.GatewayListener
	// Endpoint is where the API server is reached from outside, once known.
	Endpoint clusterv1.APIEndpoint
	// SecretHashes are digests of the Secrets the pods mount, by Secret name;
	// a pod template carries them so that new content rolls the pods.
	SecretHashes map[string]string
	// KonnectivityPort is where agents reach the konnectivity server on
	// KonnectivityHost, once known.
	KonnectivityPort int32

	version             semver.Version
	kubernetesServiceIP net.IP
	dnsIP               net.IP
}

// NewInput checks what rendering needs from the Cluster and prepares it.
func NewInput(cp *v1alpha1.HostedControlPlane, cluster *clusterv1.Cluster, settings Settings) (*Input, error) {
	in := &Input{ControlPlane: cp, Cluster: cluster, Settings: settings, SecretHashes: map[string]string{}}
	v, err := v1alpha1.ParseVersion(cp.Spec.Version)
	if err != nil {
		return nil, fmt.Errorf("spec.version: %w", err)
	}
	in.version = v
	cidr := in.ServiceCIDR()
	if cidr == "" {
		return nil, fmt.Errorf("cluster %s has no spec.clusterNetwork.services.cidrBlocks: set the workload cluster's service network, such as 10.96.0.0/12", cluster.Name)
	}
	_, ipnet, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("cluster %s spec.clusterNetwork.services.cidrBlocks[0] %q: %w", cluster.Name, cidr, err)
	}
	// The first address is the kubernetes Service's, the tenth the cluster
	// DNS's, as kubeadm has it.
	if in.kubernetesServiceIP, err = utilsnet.GetIndexedIP(ipnet, 1); err != nil {
		return nil, fmt.Errorf("cluster %s service network %s: %w", cluster.Name, cidr, err)
	}
	if in.dnsIP, err = utilsnet.GetIndexedIP(ipnet, 10); err != nil {
		return nil, fmt.Errorf("cluster %s service network %s: %w", cluster.Name, cidr, err)
	}
	return in, nil
}

// ClusterName is the name objects derive from.
func (in *Input) ClusterName() string { return in.Cluster.Name }

// Namespace is where every object of the control plane lives.
func (in *Input) Namespace() string { return in.ControlPlane.Namespace }

// name is <cluster>-<suffix>.
func (in *Input) name(suffix string) string { return in.ClusterName() + "-" + suffix }

// Labels returns the labels of an object of component (without the
// component labels for objects of the whole control plane).
func (in *Input) Labels(component string) map[string]string {
	labels := map[string]string{
		clusterv1.ClusterNameLabel: in.ClusterName(),
		contract.ControlPlaneLabel: in.ControlPlane.Name,
		contract.ManagedByLabel:    contract.ManagedBy,
	}
	if component != "" {
		labels[contract.ComponentLabel] = component
		labels[contract.InstanceLabel] = in.ClusterName()
	}
	return labels
}

// Selector selects the pods of component.
func (in *Input) Selector(component string) map[string]string {
	return map[string]string{contract.ComponentLabel: component, contract.InstanceLabel: in.ClusterName()}
}

// SelectorString is Selector in label query syntax, sorted.
func (in *Input) SelectorString(component string) string {
	sel := in.Selector(component)
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + sel[k]
	}
	return strings.Join(parts, ",")
}

// meta is the ObjectMeta of an object named name of component, owned by the
// control plane.
func (in *Input) meta(name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       in.Namespace(),
		Labels:          in.Labels(component),
		OwnerReferences: []metav1.OwnerReference{in.ownerRef()},
	}
}

func (in *Input) ownerRef() metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion:         v1alpha1.GroupVersion.String(),
		Kind:               "HostedControlPlane",
		Name:               in.ControlPlane.Name,
		UID:                in.ControlPlane.UID,
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

// ServiceCIDR is the first service network of the Cluster; NewInput refuses
// a Cluster without one.
func (in *Input) ServiceCIDR() string {
	if blocks := in.Cluster.Spec.ClusterNetwork.Services.CIDRBlocks; len(blocks) > 0 {
		return blocks[0]
	}
	return ""
}

// PodCIDR is the first pod network of the Cluster, if any.
func (in *Input) PodCIDR() string {
	if blocks := in.Cluster.Spec.ClusterNetwork.Pods.CIDRBlocks; len(blocks) > 0 {
		return blocks[0]
	}
	return ""
}

// ClusterDomain is the workload cluster's DNS domain.
func (in *Input) ClusterDomain() string {
	if d := in.Cluster.Spec.ClusterNetwork.ServiceDomain; d != "" {
		return d
	}
	return in.Settings.ClusterDomain
}
