package contract

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

// APIServerMountVolume is the pod volume of the mount named name in
// spec.deployment.apiServer.mounts: prefixed, so that no name a user picks
// is one of the controller's volumes.
func APIServerMountVolume(name string) string { return "mount-" + name }
