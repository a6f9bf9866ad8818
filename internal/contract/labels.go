package contract

// Labels every object of a control plane carries. ControlPlaneLabel names the
// HostedControlPlane, so a watch on any of its objects finds its owner.
const (
	ControlPlaneLabel = "controlplane.cluster.x-k8s.io/hosted-control-plane"
	ComponentLabel    = "app.kubernetes.io/name"
	InstanceLabel     = "app.kubernetes.io/instance"
	// ManagedByLabel marks an object this controller keeps. Objects without an
	// owner reference (those in a workload cluster, which cannot point at a
	// control plane in another cluster) are ours only when they carry it with
	// the applier's Owner as value.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of ManagedByLabel and the field manager of
	// every server-side apply.
	ManagedBy = "hosted-control-plane-controller"
	// VersionLabel on an API server pod is the Kubernetes version it runs;
	// status.versions is counted from it.
	VersionLabel = "controlplane.cluster.x-k8s.io/kubernetes-version"
)

// Component names, used as ComponentLabel values.
const (
	EtcdComponent              = "etcd"
	APIServerComponent         = "kube-apiserver"
	ControllerManagerComponent = "kube-controller-manager"
	SchedulerComponent         = "kube-scheduler"
)
