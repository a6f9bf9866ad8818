package v1alpha1

// Condition types of a HostedControlPlane, one per reconcile phase, plus
// Cluster API's Available and Paused.
const (
	// AvailableCondition is true while the API server answers through the
	// cluster's kubeconfig.
	AvailableCondition = "Available"
	// ClusterReadyCondition: the owner Cluster exists and has the network
	// settings the control plane needs.
	ClusterReadyCondition = "ClusterReady"
	// ExposureReadyCondition: the API server has an endpoint.
	ExposureReadyCondition = "ExposureReady"
	// CertificatesReadyCondition: every certificate is issued.
	CertificatesReadyCondition = "CertificatesReady"
	// KubeconfigReadyCondition: the <cluster>-kubeconfig Secret is current.
	KubeconfigReadyCondition = "KubeconfigReady"
	// EtcdReadyCondition: every etcd member runs the desired spec and is ready.
	EtcdReadyCondition = "EtcdReady"
	// APIServerReadyCondition: every API server runs the desired spec and is ready.
	APIServerReadyCondition = "APIServerReady"
	// ControllersReadyCondition: the controller manager and scheduler run the
	// desired spec and are ready.
	ControllersReadyCondition = "ControllersReady"
)

// Condition types of what the controller keeps inside the workload cluster.
// They never make the control plane unavailable: a broken add-on shows here
// while the API server keeps serving.
const (
	// NodeJoinReadyCondition: what kubeadm workers read to join is in place
	// (cluster-info, bootstrap RBAC, kubeadm-config, kubelet-config).
	NodeJoinReadyCondition = "NodeJoinReady"
	// KubernetesServiceReadyCondition: the workload cluster's kubernetes
	// Service leads to the API server: its endpoint is in place and, in
	// gateway mode, the tunnel that carries it runs on every node.
	KubernetesServiceReadyCondition = "KubernetesServiceReady"
	// CoreDNSReadyCondition: CoreDNS runs the desired spec on every replica.
	CoreDNSReadyCondition = "CoreDNSReady"
	// KubeProxyReadyCondition: kube-proxy runs the desired spec on every node,
	// or is removed as spec.kubeProxy.disabled asks.
	KubeProxyReadyCondition = "KubeProxyReady"
	// KonnectivityAgentReadyCondition: the konnectivity agents run the
	// desired spec on every replica.
	KonnectivityAgentReadyCondition = "KonnectivityAgentReady"
)

// ImagesAllowedCondition: every image override of the control plane pulls
// from a registry the platform allows (the controller's
// ALLOWED_IMAGE_REGISTRIES). A control plane whose image was accepted
// before the list refused it keeps running it; this condition says so. It
// never affects Available.
const ImagesAllowedCondition = "ImagesAllowed"

// Reasons of ImagesAllowed.
const (
	AllowedRegistriesReason = "AllowedRegistries"
	ImageNotAllowedReason   = "ImageNotAllowed"
)

// CertificatesRenewedCondition: every certificate of the control plane is
// renewed on schedule. cert-manager renews one when two thirds of its
// lifetime have passed; one with less than a sixth left was not (cert-manager
// missing or stopped, an issuer broken), and is told here and in a Warning
// event while there is still time to act. It never affects Available.
const CertificatesRenewedCondition = "CertificatesRenewed"

// Reasons of CertificatesRenewed.
const (
	RenewedOnScheduleReason  = "RenewedOnSchedule"
	RenewalOverdueReason     = "RenewalOverdue"
	CertificateExpiredReason = "CertificateExpired"
)

// HostnameConflictReason (ExposureReady): another TLSRoute on the Gateway
// listener claims a hostname of the control plane's routes and takes
// precedence.
const HostnameConflictReason = "HostnameConflict"

// MountNotFoundReason on APIServerReady: a ConfigMap or Secret of
// spec.deployment.apiServer.mounts does not exist (and is not optional),
// or the Secret of the audit webhook's token, or its key, does not, so the
// API servers keep running the spec before it.
const MountNotFoundReason = "MountNotFound"

// ManagementIssuerUnusableReason on APIServerReady: spec.managementServiceAccounts is set and
// the management cluster's service account issuer cannot be read, or the
// API servers could not verify its tokens (it is their own issuer too);
// the API servers keep running as they are.
const ManagementIssuerUnusableReason = "ManagementIssuerUnusable"

// BackupReadyCondition: the last etcd snapshot that spec.etcd.backup asks
// for was stored and verified. It never affects Available.
const BackupReadyCondition = "BackupReady"

// Reasons of BackupReady when it is false: what kept the snapshot from
// being stored.
const (
	BackupSecretInvalidReason  = "BackupSecretInvalid"
	BucketNotFoundReason       = "BucketNotFound"
	CredentialsRefusedReason   = "CredentialsRefused"
	EndpointUnreachableReason  = "EndpointUnreachable"
	EtcdUnavailableReason      = "EtcdUnavailable"
	SnapshotFailedReason       = "SnapshotFailed"
	FinalSnapshotSkippedReason = "FinalSnapshotSkipped"
	// BackupPendingReason (BackupReady Unknown): no snapshot has been taken
	// yet; the message says when the first is due.
	BackupPendingReason = "BackupPending"
	// RefNotPermittedReason: the backup Secret, or the snapshots to
	// restore, are in another namespace and no ReferenceGrant there allows
	// this control plane's namespace to use them (or the ReferenceGrant CRD
	// is not installed). Nothing of them was read.
	RefNotPermittedReason = "RefNotPermitted"
)

// EtcdRestoredCondition: etcd started from the snapshot spec.etcd.restore
// names, or was restored in place from the one the restore-etcd annotation
// names. Its message says what keeps the restore from starting (the
// store, the Secret or the snapshot missing), during which no member
// starts, or how far a restore in place is.
const EtcdRestoredCondition = "EtcdRestored"

// Reasons of EtcdRestored beside those of BackupReady.
const (
	// SnapshotNotFoundReason: the store holds no such snapshot.
	SnapshotNotFoundReason = "SnapshotNotFound"
	// RestorePendingReason: the snapshot is chosen and etcd's members
	// restore it before they start.
	RestorePendingReason = "RestorePending"
	// StoppingForRestoreReason: a restore in place stops the API servers,
	// controller-manager and scheduler, then every etcd member.
	StoppingForRestoreReason = "StoppingForRestore"
	// RestoringReason: every etcd member restores the snapshot as it
	// starts again; the API servers wait.
	RestoringReason = "Restoring"
)

// EncryptionReadyCondition: every API server encrypts the Secrets it
// writes, and every Secret stored before (in clear, or under a key that no
// longer writes) was rewritten under the key that does. It never affects
// Available.
const EncryptionReadyCondition = "EncryptionReady"

// Reasons of EncryptionReady.
const (
	// RewritingSecretsReason: the Secrets stored before the key took over
	// are being rewritten; the message counts them.
	RewritingSecretsReason = "RewritingSecrets"
	// EncryptionConfigInvalidReason: the Secret with the encryption keys
	// holds nothing the API servers can encrypt with; they keep what they
	// started with, and none rolls until it is fixed.
	EncryptionConfigInvalidReason = "EncryptionConfigInvalid"
)

// ServiceAccountKeyReadyCondition: the API servers and the controller
// manager sign service account tokens with one key, the API servers trust
// it alone, and no rotation is under way. While one is, its phase
// (TrustingNewKey, SigningWithNewKey, WaitingForOldTokens, DroppingOldKey) is
// the reason. It never affects Available.
const ServiceAccountKeyReadyCondition = "ServiceAccountKeyReady"

// EtcdCAReadyCondition: etcd's members and their clients trust the etcd
// CA alone, and no rotation of it is under way. While one is, its phase
// (TrustingNewCA, IssuingFromNewCA, DroppingOldCA) is the reason. It never
// affects Available.
const EtcdCAReadyCondition = "EtcdCAReady"

// FrontProxyCAReadyCondition: the API servers trust the front proxy CA
// alone for the front proxy's client certificate, and no rotation of it is
// under way. While one is, its phase is the reason. It never affects
// Available.
const FrontProxyCAReadyCondition = "FrontProxyCAReady"

// ClusterCAReadyCondition: the API servers trust the cluster CA alone for
// client certificates, every kubeconfig and cluster-info carry it alone,
// and no rotation of it is under way. While one is, its phase
// (TrustingNewCA, IssuingFromNewCA, WaitingForKubelets, DroppingOldCA) is
// the reason. It never affects Available.
const ClusterCAReadyCondition = "ClusterCAReady"

// RotationRequestInvalidReason is the reason of the Warning event when the
// rotate annotation names something that cannot be rotated.
const RotationRequestInvalidReason = "RotationRequestInvalid"

// Condition reasons.
const (
	ReadyReason                 = "Ready"
	WaitingForClusterReason     = "WaitingForCluster"
	ClusterNetworkMissingReason = "ClusterNetworkMissing"
	// ClusterNetworkUnsupportedReason: the Cluster's network is one the
	// control plane cannot serve yet (two families, dual-stack).
	ClusterNetworkUnsupportedReason = "ClusterNetworkUnsupported"
	GatewayNotFoundReason           = "GatewayNotFound"
	GatewayListenerReason           = "GatewayListenerMissing"
	GatewayAPIMissingReason         = "GatewayAPIMissing"
	EndpointPendingReason           = "EndpointPending"
	RoutePendingReason              = "RoutePending"
	RouteNotAcceptedReason          = "RouteNotAccepted"
	RouteRefsUnresolvedReason       = "RouteRefsUnresolved"
	CertManagerMissingReason        = "CertManagerMissing"
	IssuingReason                   = "Issuing"
	ProgressingReason               = "Progressing"
	ConflictReason                  = "ObjectConflict"
	ApplyFailedReason               = "ApplyFailed"
	WaitingReason                   = "WaitingForPreviousPhase"
	NotAnsweringReason              = "NotAnswering"
	DeletingReason                  = "Deleting"
	EtcdMembershipReason            = "EtcdMembershipChange"
	// EtcdUnhealthyReason: a change to etcd waits for a healthy cluster
	// (a leader, every member answering, no alarm).
	EtcdUnhealthyReason = "EtcdUnhealthy"
	// EtcdMemberReplacedReason: a member whose etcd refused its data (its
	// volume lost or corrupt) on the pod spec it had run healthy on was
	// removed from etcd, with its pod and volume, to come back as a new
	// member.
	EtcdMemberReplacedReason = "EtcdMemberReplaced"
	// EtcdRolloutStuckReason: a member fails on the new pod spec of etcd's
	// rollout, which stops there; nothing is replaced for it.
	EtcdRolloutStuckReason = "EtcdRolloutStuck"
	// EtcdMemberDownReason: a voting member is down and is not replaced
	// (yet): nothing says its data is lost, or the quorum or the backoff
	// between replacements holds it.
	EtcdMemberDownReason = "EtcdMemberDown"
	// EtcdReplacementLimitReason: a member whose data etcd refuses was
	// replaced as often as a member may be within a day, and is not again.
	EtcdReplacementLimitReason = "EtcdReplacementLimit"
	// EtcdDefragmentedReason: a member's database was defragmented, freeing
	// the space its deleted data held.
	EtcdDefragmentedReason = "EtcdDefragmented"
	// EtcdNoSpaceReason: etcd raised its NOSPACE alarm and refuses writes.
	EtcdNoSpaceReason            = "EtcdNoSpace"
	WaitingForControlPlaneReason = "WaitingForControlPlane"
	WorkloadUnreachableReason    = "WorkloadClusterUnreachable"
	DisabledReason               = "Disabled"
	// NoServiceEndpointReason: outside gateway mode, the endpoint is a name or
	// an address no EndpointSlice can hold, which the kubernetes Service
	// cannot lead to.
	NoServiceEndpointReason = "NoServiceEndpoint"
	// RepairedReason is the reason of the event when the controller undid
	// someone's deletion or edit of an object in the workload cluster.
	RepairedReason = "Repaired"
	// RolloutPendingReason is the reason of the event when a newer release
	// of the controller renders a workload differently and the change waits
	// for a rollout (see status.rollout).
	RolloutPendingReason = "RolloutPending"
	// NoNodesReason: an add-on that runs on the workload cluster's nodes is
	// applied, and no node has joined yet to run it.
	NoNodesReason = "NoNodes"
	// EtcdVolumesGrowingReason: the members' volumes grow (to
	// spec.etcd.volumeSize, or by autoGrow); the quota follows once every
	// one has grown.
	EtcdVolumesGrowingReason = "EtcdVolumesGrowing"
	// EtcdVolumeNotExpandableReason: the StorageClass of the members'
	// volumes does not allow expansion, so they cannot grow.
	EtcdVolumeNotExpandableReason = "EtcdVolumeNotExpandable"
)
