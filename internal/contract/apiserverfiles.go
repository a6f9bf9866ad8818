package contract

import "strconv"

// The directories the controller mounts into the kube-apiserver container.
// spec.deployment.apiServer.mounts may mount nothing at, in or above them.
const (
	APIServerPKIDir            = "/etc/kubernetes/pki"
	APIServerEgressDir         = "/etc/kubernetes/egress"
	APIServerEncryptionDir     = "/etc/kubernetes/encryption"
	APIServerAuthenticationDir = "/etc/kubernetes/authentication"
	APIServerAuditDir          = "/etc/kubernetes/audit"
	KonnectivitySocketDir      = "/run/konnectivity"
)

// APIServerOwnedPaths are the directories above.
var APIServerOwnedPaths = []string{
	APIServerPKIDir, APIServerEgressDir, APIServerEncryptionDir, APIServerAuthenticationDir, APIServerAuditDir, KonnectivitySocketDir,
}

// The files the controller renders for the API server, in their
// directories.
const (
	AuthenticationConfigFile = "authentication-config.yaml"
	AuditPolicyFile          = "audit-policy.yaml"
	AuditWebhookConfigFile   = "audit-webhook.kubeconfig"
)

// AuditTargetFile is the kubeconfig of the audit webhook target at index i
// (server, CA and token), beside AuditPolicyFile, which the audit
// forwarder reads when there is one.
func AuditTargetFile(i int) string { return "audit-target-" + strconv.Itoa(i) + ".kubeconfig" }

// AuditForwarderPort is where the audit forwarder beside each API server
// takes its events, on loopback only, to post them to every webhook target.
const AuditForwarderPort = 6447

// APIServerMountVolume is the pod volume of the mount named name in
// spec.deployment.apiServer.mounts: prefixed, so that no name a user picks
// is one of the controller's volumes.
func APIServerMountVolume(name string) string { return "mount-" + name }

// The management cluster's service accounts (spec.managementServiceAccounts)
// reach the workload cluster's API server under these names, which no other
// user or group of it can have: the API servers refuse OIDC identities with
// the prefix while the authenticator is on.
const (
	// ManagementUserPrefix comes before the service account's own user
	// name (system:serviceaccount:<namespace>:<name>) and group
	// (system:serviceaccounts:<namespace>).
	ManagementUserPrefix = "management-cluster:"
	// ManagementKeysPort is where the sidecar beside each API server serves
	// it, on loopback only, the management cluster's issuer discovery
	// document and keys, which the controller copies into the
	// authentication Secret: the API servers never reach the management
	// cluster's API server.
	ManagementKeysPort = 6446
	// ManagementDiscoveryFile and ManagementKeysFile are the discovery
	// document and the keys, beside AuthenticationConfigFile.
	ManagementDiscoveryFile = "management-openid-configuration.json"
	ManagementKeysFile      = "management-jwks.json"
)

// ManagementAudience is the audience a management cluster's service account
// token must be requested for to reach the workload cluster of cluster in
// namespace: one per control plane, so that a token for one tenant's
// cluster is refused by every other.
func ManagementAudience(namespace, cluster string) string {
	return "controlplane.cluster.x-k8s.io/" + namespace + "/" + cluster
}
