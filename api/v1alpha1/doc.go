// Package v1alpha1 is the controlplane.cluster.x-k8s.io/v1alpha1 API: the
// HostedControlPlane, a Cluster API control plane whose etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and konnectivity server run as pods
// in the management cluster, and the HostedControlPlaneTemplate that
// ClusterClasses refer to.
//
// +kubebuilder:object:generate=true
// +groupName=controlplane.cluster.x-k8s.io
package v1alpha1
