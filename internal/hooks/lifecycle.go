package hooks

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
)

// BeforeClusterCreate lets the topology be created: what a hosted control
// plane needs from its Cluster is checked by ValidateTopology, before this
// hook runs.
func (h *Handlers) BeforeClusterCreate(ctx context.Context, req *runtimehooksv1.BeforeClusterCreateRequest, resp *runtimehooksv1.BeforeClusterCreateResponse) {
	ctrl.LoggerFrom(ctx).Info("Cluster topology is being created", "Cluster", klog.KObj(&req.Cluster))
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
}

// AfterControlPlaneInitialized records that the control plane answered for
// the first time.
func (h *Handlers) AfterControlPlaneInitialized(ctx context.Context, req *runtimehooksv1.AfterControlPlaneInitializedRequest, resp *runtimehooksv1.AfterControlPlaneInitializedResponse) {
	ctrl.LoggerFrom(ctx).Info("Control plane initialized", "Cluster", klog.KObj(&req.Cluster))
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
}

// AfterControlPlaneUpgrade records the version the control plane reached;
// Cluster API calls it once every API server runs that version.
func (h *Handlers) AfterControlPlaneUpgrade(ctx context.Context, req *runtimehooksv1.AfterControlPlaneUpgradeRequest, resp *runtimehooksv1.AfterControlPlaneUpgradeResponse) {
	ctrl.LoggerFrom(ctx).Info("Control plane upgraded", "Cluster", klog.KObj(&req.Cluster), "version", req.KubernetesVersion)
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
}

// BeforeClusterDelete lets the deletion proceed and closes the extension's
// etcd connections of the cluster, which is going away. The final etcd
// snapshot is not taken here but by the controller, which holds the
// HostedControlPlane with a finalizer until it is stored (internal/backup):
// that way it is taken also when a control plane is deleted without its
// Cluster, or without the extension registered.
func (h *Handlers) BeforeClusterDelete(ctx context.Context, req *runtimehooksv1.BeforeClusterDeleteRequest, resp *runtimehooksv1.BeforeClusterDeleteResponse) {
	h.Etcd.Forget(types.NamespacedName{Namespace: req.Cluster.Namespace, Name: req.Cluster.Name})
	ctrl.LoggerFrom(ctx).Info("Cluster is being deleted, closed its etcd connections", "Cluster", klog.KObj(&req.Cluster))
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
}
