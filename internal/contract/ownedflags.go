package contract

import (
	"maps"
	"strings"
)

// The flags below are set by the renderer (internal/components, whose
// TestOwnedFlagsAreRendered keeps these tables true) and refused in a
// user's args by admission, both the webhook and the extension's validation
// of a ClusterClass, which must not disagree with what is rendered.

// OwnedFlags are flags of one container that the controller sets and must
// own: certificates and files it mounts, addresses and ports its Services,
// probes and peers use, cluster membership. Each maps to why, in words
// admission shows a user whose args try to set it. Tuning flags are not
// here: args override those.
type OwnedFlags map[string]string

// Why says why the controller owns flag, and whether it does. Kubernetes
// components read "_" in a flag name as "-", so both spellings match.
func (o OwnedFlags) Why(flag string) (string, bool) {
	why, ok := o[strings.ReplaceAll(flag, "_", "-")]
	return why, ok
}

// Reasons shared by several components' owned flags.
const (
	ownedKubeconfig     = "it names the kubeconfig the controller writes and mounts"
	ownedServiceCIDR    = "it comes from the Cluster's spec.clusterNetwork.services.cidrBlocks, where it is changed"
	ownedServiceAccount = "it is the service account key the controller keeps for the API server and the controller manager"
	ownedProbeAddress   = "the probes reach the component on the address and port the controller expects"
	ownedCertDir        = "it is the only writable directory of the read-only container"
	ownedLeaderElection = "several replicas run and must not act at once"
)

// Reasons of etcd's owned flags.
const (
	ownedEtcdMembership = "it defines the etcd cluster's membership, which the controller manages"
	ownedEtcdAddress    = "the Services, probes and members use the addresses the controller picks"
	ownedEtcdClientTLS  = "etcd serves the certificate the controller issues and admits only clients with its certificates"
	ownedEtcdPeerTLS    = "members authenticate each other with the certificates the controller issues"
)

// EtcdOwnedFlags are the etcd flags of etcdStatefulSet that spec.etcd.args
// may not override. Tuning (quota-backend-bytes, compaction, snapshots)
// stays open.
var EtcdOwnedFlags = OwnedFlags{
	"advertise-client-urls":       ownedEtcdAddress,
	"client-cert-auth":            ownedEtcdClientTLS,
	"cert-file":                   ownedEtcdClientTLS,
	"data-dir":                    "it is where the member's volume is mounted",
	"initial-advertise-peer-urls": ownedEtcdAddress,
	"initial-cluster":             ownedEtcdMembership,
	"initial-cluster-state":       ownedEtcdMembership,
	"initial-cluster-token":       ownedEtcdMembership,
	"key-file":                    ownedEtcdClientTLS,
	"listen-client-urls":          ownedEtcdAddress,
	"listen-metrics-urls":         ownedEtcdAddress,
	"listen-peer-urls":            ownedEtcdAddress,
	"name":                        ownedEtcdMembership,
	"peer-cert-file":              ownedEtcdPeerTLS,
	"peer-client-cert-auth":       ownedEtcdPeerTLS,
	"peer-key-file":               ownedEtcdPeerTLS,
	"peer-trusted-ca-file":        ownedEtcdPeerTLS,
	"trusted-ca-file":             ownedEtcdClientTLS,
}

// APIServerOwnedFlags are the kube-apiserver flags of apiServerArgs that
// spec.deployment.apiServer.args may not override.
var APIServerOwnedFlags = OwnedFlags{
	"advertise-address":                "it is each pod's own address",
	"client-ca-file":                   "it trusts the cluster CA the controller keeps",
	"egress-selector-config-file":      "it sends traffic to nodes and pods through the konnectivity server beside the API server",
	"encryption-provider-config":       "it encrypts the workload cluster's Secrets with the keys the controller keeps, which the etcd snapshots need",
	"endpoint-reconciler-type":         "the controller keeps the workload cluster's kubernetes endpoint itself; pod addresses mean nothing there",
	"etcd-servers":                     "it points the API server at the hosted etcd",
	"etcd-cafile":                      "it is the etcd client certificate the controller issues and mounts",
	"etcd-certfile":                    "it is the etcd client certificate the controller issues and mounts",
	"etcd-keyfile":                     "it is the etcd client certificate the controller issues and mounts",
	"kubelet-client-certificate":       "it is the kubelet client certificate the controller issues and mounts",
	"kubelet-client-key":               "it is the kubelet client certificate the controller issues and mounts",
	"proxy-client-cert-file":           "it is the front-proxy client certificate the controller issues and mounts",
	"proxy-client-key-file":            "it is the front-proxy client certificate the controller issues and mounts",
	"requestheader-client-ca-file":     "it trusts the front-proxy CA the controller keeps",
	"secure-port":                      "the Services, probes and network policies use the port the controller picks",
	"service-account-key-file":         ownedServiceAccount,
	"service-account-signing-key-file": ownedServiceAccount,
	"service-cluster-ip-range":         ownedServiceCIDR,
	"tls-cert-file":                    "it is the serving certificate the controller issues for the endpoint and certSANs",
	"tls-private-key-file":             "it is the serving certificate the controller issues for the endpoint and certSANs",
}

// KonnectivityServerOwnedFlags are the konnectivity server flags of
// konnectivityArgs that spec.deployment.apiServer.konnectivity.args may not
// override.
var KonnectivityServerOwnedFlags = OwnedFlags{
	"agent-namespace":         "it admits the agents the controller deploys, by their service account tokens",
	"agent-port":              "the Services and agents use the port the controller picks",
	"agent-service-account":   "it admits the agents the controller deploys, by their service account tokens",
	"authentication-audience": "it admits the agents the controller deploys, by their service account tokens",
	"cluster-cert":            "it is the serving certificate the controller issues for the agents",
	"cluster-key":             "it is the serving certificate the controller issues for the agents",
	"health-port":             ownedProbeAddress,
	"kubeconfig":              ownedKubeconfig,
	"mode":                    "the API server's egress selector speaks gRPC to it",
	"server-count":            "it follows the number of API servers, from a ConfigMap the controller keeps",
	"server-port":             "the API server reaches it through a socket, not a port",
	"uds-name":                "the API server reaches it through this socket",
}

// SchedulerOwnedFlags are the flags controllerDeployment sets for every
// controller, which spec.deployment.scheduler.args may not override. The
// probes rely on the default secure port, so it is owned without being set.
var SchedulerOwnedFlags = OwnedFlags{
	"authentication-kubeconfig": ownedKubeconfig,
	"authorization-kubeconfig":  ownedKubeconfig,
	"bind-address":              ownedProbeAddress,
	"cert-dir":                  ownedCertDir,
	"kubeconfig":                ownedKubeconfig,
	"leader-elect":              ownedLeaderElection,
	"secure-port":               ownedProbeAddress,
}

// ControllerManagerOwnedFlags are the flags of ControllerManager and
// controllerDeployment that spec.deployment.controllerManager.args may not
// override.
var ControllerManagerOwnedFlags = func() OwnedFlags {
	owned := OwnedFlags{
		"cluster-signing-cert-file":        "it is the cluster CA the controller keeps, which signs kubelet certificates",
		"cluster-signing-key-file":         "it is the cluster CA the controller keeps, which signs kubelet certificates",
		"root-ca-file":                     "it is the cluster CA the controller keeps",
		"service-account-private-key-file": ownedServiceAccount,
		"service-cluster-ip-range":         ownedServiceCIDR,
	}
	maps.Copy(owned, SchedulerOwnedFlags)
	return owned
}()

// CoreDNSOwnedFlags are the CoreDNS flags of coreDNSDeployment that
// spec.coredns.args may not override.
var CoreDNSOwnedFlags = OwnedFlags{
	"conf": "it reads the Corefile the controller keeps",
}

// KonnectivityAgentOwnedFlags are the agent flags of
// konnectivityAgentDeployment that spec.konnectivityClient.args may not
// override.
var KonnectivityAgentOwnedFlags = OwnedFlags{
	"ca-cert":                    "it trusts the cluster CA of the agent's service account",
	"health-server-port":         ownedProbeAddress,
	"proxy-server-host":          "it is where the konnectivity server is reached, which the controller derives from the endpoint or gateway",
	"proxy-server-port":          "it is where the konnectivity server is reached, which the controller derives from the endpoint or gateway",
	"service-account-token-path": "it is the token the controller mounts for the konnectivity server's audience",
}

// KubeProxyOwnedFlags are the kube-proxy flags of kubeProxyDaemonSet that
// spec.kubeProxy.args may not override. --config is not among them: with
// it kube-proxy ignores every other flag, so tuning by args means setting
// it to "" (and --kubeconfig to the file beside it).
var KubeProxyOwnedFlags = OwnedFlags{
	"hostname-override": "it must be the node's name, which each pod reads from its own spec",
}
