package controller

import (
	"context"
	"errors"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/apply"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
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
}

// workloadKinds are the kinds the controller keeps in workload clusters; the
// ClusterCache caches and watches only those of them that carry our label.
func workloadKinds() []client.Object {
	return []client.Object{
		&corev1.ConfigMap{}, &corev1.Service{}, &corev1.ServiceAccount{}, &discoveryv1.EndpointSlice{},
		&appsv1.Deployment{}, &appsv1.DaemonSet{},
		&rbacv1.Role{}, &rbacv1.RoleBinding{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{},
	}
}

// ClusterCacheOptions configure the ClusterCache for this controller:
// kubeconfig Secrets are read through secrets (the manager's label-scoped
// client), and the per-cluster caches hold only the objects we keep there.
func ClusterCacheOptions(secrets client.Reader) clustercache.Options {
	ours := cache.ByObject{Label: labels.SelectorFromSet(components.WorkloadLabels())}
	byObject := map[client.Object]cache.ByObject{}
	for _, obj := range workloadKinds() {
		byObject[obj] = ours
	}
	return clustercache.Options{
		SecretClient: secrets,
		Cache:        clustercache.CacheOptions{ByObject: byObject},
		Client:       clustercache.ClientOptions{UserAgent: contract.ManagedBy},
	}
}

// addon is one part of what the controller keeps in the workload cluster;
// it owns one condition.
type addon struct {
	condition string
	// render returns the part's objects, and whether they are to be removed
	// rather than kept.
	render func(context.Context, *scope) (objs []client.Object, remove bool, err error)
	// ready tells whether what was applied runs; nil when applied is ready.
	ready func(context.Context, client.Reader, []client.Object) (readiness.Outcome, error)
}

func (r *Reconciler) addons() []addon {
	return []addon{
		{v1alpha1.NodeJoinReadyCondition, r.renderJoin, nil},
		{v1alpha1.KubernetesServiceReadyCondition, keep(components.KubernetesService), kubernetesServiceReady},
		{v1alpha1.CoreDNSReadyCondition, keep(components.CoreDNS), rolledOut},
		{v1alpha1.KubeProxyReadyCondition, renderKubeProxy, rolledOut},
		{v1alpha1.KonnectivityAgentReadyCondition, keep(components.KonnectivityAgent), rolledOut},
	}
}

func keep(render func(*components.Input) []client.Object) func(context.Context, *scope) ([]client.Object, bool, error) {
	return func(_ context.Context, s *scope) ([]client.Object, bool, error) { return render(s.in), false, nil }
}

// renderJoin needs the cluster CA that joining workers pin.
func (r *Reconciler) renderJoin(ctx context.Context, s *scope) ([]client.Object, bool, error) {
	ca := &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: s.in.Namespace(), Name: s.in.CASecret()}, ca); err != nil {
		return nil, false, fmt.Errorf("read the cluster CA: %w", err)
	}
	objs, err := components.Join(s.in, ca.Data[corev1.TLSCertKey])
	return objs, false, err
}

func renderKubeProxy(_ context.Context, s *scope) ([]client.Object, bool, error) {
	objs, err := components.KubeProxy(s.in)
	return objs, s.in.KubeProxyDisabled(), err
}

// reconcileWorkload keeps the add-ons in the workload cluster, each under
// its own condition, once the API server answers. Their failures show in
// their conditions and events; they never touch the control plane's.
func (r *Reconciler) reconcileWorkload(ctx context.Context, s *scope) error {
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
		for _, a := range r.addons() {
			setCondition(s.hcp, a.condition, metav1.ConditionFalse, v1alpha1.WorkloadUnreachableReason,
				"cannot reach the workload cluster through Cluster API's cluster cache: "+err.Error())
		}
		return nil
	}
	applier := &apply.Applier{Client: c, Reader: c, LiveReader: live, Owner: contract.ManagedBy}
	var errs []error
	for _, a := range r.addons() {
		out, err := r.syncAddon(ctx, s, applier, a)
		if err != nil {
			out = failure(err)
		}
		r.record(s.hcp, a.condition, out)
		if out.Warn {
			errs = append(errs, fmt.Errorf("%s: %s", a.condition, out.Message))
		}
	}
	return errors.Join(errs...)
}

// syncAddon applies or removes one add-on, tells about every repair in an
// event, and reports how far the add-on is.
func (r *Reconciler) syncAddon(ctx context.Context, s *scope, applier *apply.Applier, a addon) (readiness.Outcome, error) {
	objs, remove, err := a.render(ctx, s)
	if err != nil {
		return readiness.Outcome{}, err
	}
	if remove {
		for _, obj := range objs {
			if _, err := applier.Delete(ctx, obj); err != nil {
				return readiness.Outcome{}, err
			}
		}
		return readiness.Outcome{Done: true, Reason: v1alpha1.DisabledReason, Message: "disabled by the spec; removed from the workload cluster"}, nil
	}
	// An add-on applied before whose object is missing was deleted by
	// someone: its recreation is a repair.
	prior := conditions.Get(s.hcp, a.condition)
	established := prior != nil && (prior.Reason == v1alpha1.ReadyReason || prior.Reason == v1alpha1.ProgressingReason)
	for _, obj := range objs {
		change, err := applier.Sync(ctx, obj)
		if err != nil {
			return readiness.Outcome{}, err
		}
		// The repaired object is the event's related object: events about
		// the same objects are counted in one series, others stand apart.
		switch {
		case change == apply.Restored:
			r.recorder.Eventf(s.hcp, obj, corev1.EventTypeNormal, v1alpha1.RepairedReason, "Restore",
				"restored %s in the workload cluster, which had been edited", objectName(obj))
		case change == apply.Created && established:
			r.recorder.Eventf(s.hcp, obj, corev1.EventTypeNormal, v1alpha1.RepairedReason, "Recreate",
				"recreated %s in the workload cluster, which had been deleted", objectName(obj))
		}
	}
	if a.ready == nil {
		return readiness.Ready(fmt.Sprintf("%d objects of Kubernetes %s in place", len(objs), s.in.AddonsVersion())), nil
	}
	return a.ready(ctx, applier.Reader, objs)
}

func objectName(obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if obj.GetNamespace() == "" {
		return kind + " " + obj.GetName()
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// rolledOut is done when every Deployment and DaemonSet among objs runs its
// current spec on every replica or node.
func rolledOut(ctx context.Context, c client.Reader, objs []client.Object) (readiness.Outcome, error) {
	return readiness.RolledOut(ctx, c, objs, readiness.KindName)
}

// kubernetesServiceReady is rolledOut, and a problem when there is nothing
// to roll out because no EndpointSlice can hold the endpoint.
func kubernetesServiceReady(ctx context.Context, c client.Reader, objs []client.Object) (readiness.Outcome, error) {
	if len(objs) == 0 {
		return readiness.Problem(v1alpha1.NoServiceEndpointReason,
			"the endpoint's host is a name, or an address an EndpointSlice cannot hold (loopback, link-local), and kube-proxy leads "+
				"Services to addresses only: pods cannot reach the API server through the kubernetes Service; use a load balancer "+
				"that gives an address, a node port, or spec.gateway, whose tunnel carries the Service"), nil
	}
	return rolledOut(ctx, c, objs)
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

// markWorkloadWaiting says, before the API server first answers, what the
// workload conditions wait for; afterwards they keep what was last observed.
func markWorkloadWaiting(hcp *v1alpha1.HostedControlPlane, addons []addon) {
	for _, a := range addons {
		if conditions.Get(hcp, a.condition) == nil {
			setCondition(hcp, a.condition, metav1.ConditionFalse, v1alpha1.WaitingForControlPlaneReason,
				"waiting for the API server to answer")
		}
	}
}
