package controller

import (
	"context"
	"errors"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/apply"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/telemetry"
)

// WorkloadClusters reaches workload clusters: Cluster API's ClusterCache,
// which keeps one connection and cache per cluster from its
// <cluster>-kubeconfig Secret.
type WorkloadClusters interface {
	GetClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error)
	GetUncachedClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error)
	Watch(ctx context.Context, cluster client.ObjectKey, watcher clustercache.Watcher) error
	GetClusterSource(controllerName string, mapFunc func(ctx context.Context, cluster client.Object) []ctrl.Request,
		opts ...clustercache.GetClusterSourceOption) source.Source
	// ProbeSoon has the connection to cluster probed now, so that one that
	// no longer works is made again.
	ProbeSoon(cluster client.ObjectKey)
}

// workloadKinds are the kinds the controller keeps in workload clusters; its
// caches of them hold and watch only those that carry our label
// (workloadCacheOptions).
func workloadKinds() []client.Object {
	return []client.Object{
		&corev1.ConfigMap{}, &corev1.Service{}, &corev1.ServiceAccount{}, &discoveryv1.EndpointSlice{},
		&corev1.Endpoints{}, //nolint:staticcheck // the kubernetes Service's, beside its EndpointSlice (components.KubernetesService)
		&appsv1.Deployment{}, &appsv1.DaemonSet{},
		&rbacv1.Role{}, &rbacv1.RoleBinding{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{},
	}
}

// ClusterCacheOptions configure the ClusterCache for this controller:
// kubeconfig Secrets are read through secrets (the manager's label-scoped
// client). Its caches hold nothing: the controller reads the workload
// clusters through caches of its own (workloadCaches).
func ClusterCacheOptions(secrets client.Reader, shard Shard) clustercache.Options {
	return clustercache.Options{
		SecretClient:     secrets,
		WatchFilterValue: shard.WatchFilter,
		Client:           clustercache.ClientOptions{UserAgent: contract.ManagedBy},
	}
}

// reconcileWorkload keeps the workload side, each phase under its own
// condition, once the API server answers. Their failures show in their
// conditions and events; they never touch the control plane's.
func (r *Reconciler) reconcileWorkload(ctx context.Context, s *scope) (err error) {
	ctx, span := telemetry.Start(ctx, "workload sync")
	defer func() { telemetry.End(span, err) }()
	key := client.ObjectKeyFromObject(s.cluster)
	c, err := r.clusters.GetClient(ctx, key)
	var live client.Client
	if err == nil {
		live, err = r.clusters.GetUncachedClient(ctx, key)
	}
	if err == nil {
		err = r.watchWorkload(ctx, s)
	}
	if err != nil {
		// The ClusterCache's cluster source brings us back once it connects.
		markUnreachable(s.hcp, err)
		return nil
	}
	c, live = telemetry.WorkloadClient(c, false), telemetry.WorkloadClient(live, true)
	workload := side{name: workloadSide, applier: &apply.Applier{Client: c, Reader: c, LiveReader: live, Owner: contract.ManagedBy}, repairs: true}
	problems := r.run(ctx, s, workload, workloadPhases())
	more, err := r.rewriteSecrets(ctx, s, live)
	s.rewriting = more
	if s.connectionFailed || err != nil && connectionFailed(err) {
		// Perhaps the connection's credentials or CA were rotated under it,
		// which the ClusterCache would notice only at its next probe.
		r.clusters.ProbeSoon(key)
	}
	return errors.Join(append(problems, err)...)
}

// watchWorkload watches our objects in the workload cluster, so that an edit
// or deletion is healed at once. The ClusterCache adds each watch once per
// connection.
func (r *Reconciler) watchWorkload(ctx context.Context, s *scope) error {
	if r.controller == nil {
		return nil // not set up with a manager: nothing watches
	}
	hcp := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s.hcp)}
	toControlPlane := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{hcp}
	})
	for _, kind := range workloadKinds() {
		err := r.clusters.Watch(ctx, client.ObjectKeyFromObject(s.cluster), clustercache.NewWatcher(clustercache.WatcherOptions{
			Name:         fmt.Sprintf("hostedcontrolplane-%T", kind),
			Watcher:      r.controller,
			Kind:         kind,
			EventHandler: toControlPlane,
		}))
		if err != nil {
			return fmt.Errorf("watch %T: %w", kind, err)
		}
	}
	return nil
}
