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

// Condition reasons.
const (
	ReadyReason                 = "Ready"
	WaitingForClusterReason     = "WaitingForCluster"
	ClusterNetworkMissingReason = "ClusterNetworkMissing"
	GatewayNotFoundReason       = "GatewayNotFound"
	GatewayListenerReason       = "GatewayListenerMissing"
	GatewayAPIMissingReason     = "GatewayAPIMissing"
	EndpointPendingReason       = "EndpointPending"
	CertManagerMissingReason    = "CertManagerMissing"
	IssuingReason               = "Issuing"
	ProgressingReason           = "Progressing"
	ConflictReason              = "ObjectConflict"
	ApplyFailedReason           = "ApplyFailed"
	WaitingReason               = "WaitingForPreviousPhase"
	NotAnsweringReason          = "NotAnswering"
	DeletingReason              = "Deleting"
	EtcdMembershipReason        = "EtcdMembershipChange"
)
