package controller

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/util/workqueue"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=hostedcontrolplanes;hostedcontrolplanes/status;hostedcontrolplanes/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets;services;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates;issuers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=tlsroutes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cilium.io,resources=ciliumnetworkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=list;watch

// Shard is the part of a fleet one controller serves: the control planes
// and Clusters labelled cluster.x-k8s.io/watch-filter=WatchFilter (Cluster
// API's convention), when set, in Namespaces, when set.
type Shard struct {
	WatchFilter string
	Namespaces  []string
}

// CacheOptions limit the manager's cache to the objects this controller
// labels, so it holds the control planes' objects and nothing else of the
// management cluster; only control planes and Clusters are cached whole, or
// those of the shard. The label selector is the default rather than per
// kind, so that kinds whose CRDs arrive after the start (cert-manager's,
// Gateway API's) get it too. A control plane outside the shard is not in
// the cache, so an event of one of its objects ends its pass at once.
// Cached objects keep no managedFields, which nothing here reads (objects
// are compared with what is rendered, field by field; the API server keeps
// them when an update leaves them out) and which are a large part of each
// (the status writers' entries of every pod and workload). Its watches are
// long (longWatches).
func CacheOptions(shard Shard) cache.Options {
	all := cache.ByObject{Label: labels.Everything()}
	if shard.WatchFilter != "" {
		all.Label = labels.SelectorFromSet(labels.Set{clusterv1.WatchLabel: shard.WatchFilter})
	}
	opts := cache.Options{
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{contract.ManagedByLabel: contract.ManagedBy}),
		ByObject:             map[client.Object]cache.ByObject{&v1alpha1.HostedControlPlane{}: all, &clusterv1.Cluster{}: all},
		DefaultTransform:     cache.TransformStripManagedFields(),
		NewInformer:          longWatches,
	}
	if len(shard.Namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range shard.Namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// SetupWithManager registers the controller and its watches. Kinds of
// cert-manager and Gateway API are watched once their CRDs exist, which may
// be after the controller starts.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byLabel := handler.EnqueueRequestsFromMapFunc(mapByLabel)
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.HostedControlPlane{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&networkingv1.NetworkPolicy{}).
		// Secrets cert-manager issues, pods and etcd's volume claims carry our
		// labels but no owner reference to the control plane.
		Watches(&corev1.Secret{}, byLabel).
		Watches(&corev1.Pod{}, byLabel).
		Watches(&corev1.PersistentVolumeClaim{}, byLabel).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(mapCluster)).
		// A new connection to a workload cluster brings its add-ons.
		WatchesRawSource(r.clusters.GetClusterSource("hostedcontrolplane", mapCluster)).
		// News from an API server (see probe) or an etcd (etcd.Membership,
		// observeEtcdPresented).
		WatchesRawSource(answers(r.probes.Events())).
		WatchesRawSource(answers(r.etcdAnswers.Events())).
		WatchesRawSource(answers(r.etcdPresented.Events())).
		Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	if r.issuers == nil {
		dc, err := discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
		if err != nil {
			return fmt.Errorf("client for the management cluster's issuer: %w", err)
		}
		r.issuers = NewIssuerSource(dc.RESTClient())
	}
	// Gateways are not ours, so the manager's cache, which holds only what
	// we label, has none: a cache of their own holds them all. A Gateway
	// deleted, re-created or with its listeners changed concerns the control
	// planes served through it at once, not at their next pass.
	gateways, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: cache.TransformStripManagedFields(), NewInformer: longWatches,
	})
	if err != nil {
		return fmt.Errorf("cache for Gateways: %w", err)
	}
	if err := mgr.Add(gateways); err != nil {
		return err
	}
	owner := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &v1alpha1.HostedControlPlane{}, handler.OnlyControllerOwner())
	woken := make(chan event.TypedGenericEvent[types.NamespacedName])
	if err := c.Watch(answers(woken)); err != nil {
		return err
	}
	r.watches = &optionalWatches{controller: c, cache: mgr.GetCache(), client: mgr.GetClient(), woken: woken, kinds: []optionalKind{
		{obj: &cmv1.Certificate{}, handler: owner},
		{obj: &cmv1.Issuer{}, handler: owner},
		{obj: &gatewayv1.TLSRoute{}, handler: owner},
		{obj: ciliumNetworkPolicy(), handler: owner},
		// Its controller's status writes change nothing the control planes read.
		{
			obj: &gatewayv1.Gateway{}, handler: handler.EnqueueRequestsFromMapFunc(r.mapGateway), cache: gateways,
			predicates: []predicate.Predicate{predicate.GenerationChangedPredicate{}},
		},
		// Every TLSRoute, whoever's, to see who else claims a control plane's
		// hostnames; only a spec change can make or end a claim.
		{
			obj: &gatewayv1.TLSRoute{}, handler: handler.EnqueueRequestsFromMapFunc(r.mapRoute), cache: gateways,
			predicates: []predicate.Predicate{predicate.GenerationChangedPredicate{}},
			index:      &fieldIndex{field: hostnameField, values: routeHostnames},
		},
	}}
	r.gateways = gateways
	// The CRDs, by their metadata alone, in the cache that holds what we do
	// not label: one of an optional kind installed (or established) starts
	// its watch at once, rather than at some control plane's next pass.
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return c.Watch(source.Kind(gateways, client.Object(crd), handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.watches.crdChanged(ctx, e.Object.GetName())
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.watches.crdChanged(ctx, e.ObjectNew.GetName())
		},
	}))
}

// answers wakes the control plane of each key sent on events.
func answers(events <-chan event.TypedGenericEvent[types.NamespacedName]) source.TypedSource[reconcile.Request] {
	return source.TypedChannel(events, handler.TypedFuncs[types.NamespacedName, reconcile.Request]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[types.NamespacedName], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(reconcile.Request{NamespacedName: e.Object})
		},
	})
}

// mapGateway wakes the control planes served through a Gateway.
func (r *Reconciler) mapGateway(ctx context.Context, obj client.Object) []reconcile.Request {
	hcps := &v1alpha1.HostedControlPlaneList{}
	if err := r.client.List(ctx, hcps); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list control planes for a Gateway", "gateway", client.ObjectKeyFromObject(obj))
		return nil
	}
	var out []reconcile.Request
	for _, hcp := range hcps.Items {
		if gw := hcp.Spec.Gateway; gw != nil && gw.Name == obj.GetName() && gw.Namespace == obj.GetNamespace() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&hcp)})
		}
	}
	return out
}

func mapByLabel(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[contract.ControlPlaneLabel]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}}}
}

func mapCluster(_ context.Context, obj client.Object) []reconcile.Request {
	cluster, ok := obj.(*clusterv1.Cluster)
	if !ok {
		return nil
	}
	key, ok := controlPlaneOf(cluster)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// optionalKind is a kind whose CRD may be installed after the controller
// starts.
type optionalKind struct {
	obj        client.Object
	handler    handler.EventHandler
	predicates []predicate.Predicate
	// cache holds the kind; the manager's when nil.
	cache cache.Cache
	// index is added to that cache before the watch starts.
	index   *fieldIndex
	watched bool
}

// fieldIndex is an index of a cache: the values of field of each object.
type fieldIndex struct {
	field   string
	values  client.IndexerFunc
	indexed bool
}

// optionalWatches starts watching each optional kind once its CRD exists.
type optionalWatches struct {
	mu         sync.Mutex
	controller controller.Controller
	cache      cache.Cache
	client     client.Client
	kinds      []optionalKind
	// woken wakes a control plane (see wakeAll).
	woken chan<- event.TypedGenericEvent[types.NamespacedName]
	// lookedAt is when the kinds not watched were last looked for; zero
	// once a CRD of one of their groups changed.
	lookedAt time.Time
	// lookEvery is how long after lookedAt passes look again (see
	// lookAgainAfter); zero until the first look.
	lookEvery time.Duration
}

// ciliumNetworkPolicy is an empty CiliumNetworkPolicy, the controller
// having none of Cilium's types.
func ciliumNetworkPolicy() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(render.CiliumNetworkPolicyKind)
	return u
}

// watching tells whether obj's kind is watched: its CRD is installed.
func (w *optionalWatches) watching(obj client.Object) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range w.kinds {
		if k.watched && sameKind(k.obj, obj) {
			return true
		}
	}
	return false
}

// sameKind tells whether a and b are of one kind: of one Go type and, for
// unstructured objects, which carry their kind, of one GroupVersionKind.
func sameKind(a, b client.Object) bool {
	return reflect.TypeOf(a) == reflect.TypeOf(b) && a.GetObjectKind().GroupVersionKind() == b.GetObjectKind().GroupVersionKind()
}

// indexed tells whether the cache index of field exists yet.
func (w *optionalWatches) indexed(field string) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range w.kinds {
		if k.index != nil && k.index.field == field {
			return k.index.indexed
		}
	}
	return false
}

// lookAgainAfter is how soon passes look again for the kinds not watched
// yet, whatever the CRD events said: the controller's REST mapper may not
// know a kind yet when the event of its CRD arrives (seen when the CRD was
// installed right after the controller started: the mapper's first
// discovery had no group of it, and the look the event caused found no kind
// either), and nothing would look again. Each look that leaves a kind
// unwatched doubles the wait, up to lookAgainAtMost, and a CRD of their
// groups brings it back to lookAgainAfter: a management cluster without
// Cilium is asked for its kind (a discovery request answered 404) a few
// times after the start and then every quarter of an hour, where it was
// asked at every pass at least 30 s after the last.
const (
	lookAgainAfter  = 30 * time.Second
	lookAgainAtMost = 15 * time.Minute
)

// ensure adds the watches whose CRDs have appeared, looking for them (a
// discovery request for each kind not watched) on the first pass, after a
// CRD of one of their groups changed (see crdChanged), and then, while one
// is not watched, after waits from lookAgainAfter to lookAgainAtMost, never
// on every pass. A watch it starts passes over every control plane
// (wakeAll).
func (w *optionalWatches) ensure(ctx context.Context) {
	if w == nil {
		return // not set up with a manager: nothing watches
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ensureLocked(ctx) {
		go w.wakeAll(context.WithoutCancel(ctx))
	}
}

// ensureLocked is ensure with w.mu held.
func (w *optionalWatches) ensureLocked(ctx context.Context) bool {
	if !w.lookedAt.IsZero() && time.Since(w.lookedAt) < w.lookEvery {
		return false
	}
	if w.lookedAt.IsZero() {
		w.lookEvery = lookAgainAfter
	} else {
		w.lookEvery = min(2*w.lookEvery, lookAgainAtMost)
	}
	w.lookedAt = time.Now()
	started := false
	for i := range w.kinds {
		k := &w.kinds[i]
		if k.watched {
			continue
		}
		if _, err := w.client.IsObjectNamespaced(k.obj); err != nil {
			continue // CRD not installed (yet)
		}
		from := k.cache
		if from == nil {
			from = w.cache
		}
		if i := k.index; i != nil && !i.indexed {
			if err := from.IndexField(ctx, k.obj, i.field, i.values); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "index", "kind", fmt.Sprintf("%T", k.obj), "field", i.field)
				continue
			}
			i.indexed = true
		}
		if err := w.controller.Watch(source.Kind(from, k.obj, k.handler, k.predicates...)); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "watch", "kind", fmt.Sprintf("%T", k.obj))
			continue
		}
		k.watched = true
		started = true
	}
	return started
}

// crdChanged looks for the kinds again when the CRD named crd (created, or
// changed, as when it becomes established) is of one of their groups, and
// when that starts a watch passes over every control plane (wakeAll). It looks
// apart from the CRD informer's handler, which must not wait: the
// controller starts a watch only once its start is done, and its start
// waits for this informer's handler to have seen every CRD.
func (w *optionalWatches) crdChanged(ctx context.Context, crd string) {
	if !w.ofOptionalGroup(crd) {
		return
	}
	go func() {
		w.mu.Lock()
		w.lookedAt = time.Time{}
		started := w.ensureLocked(ctx)
		w.mu.Unlock()
		if started {
			w.wakeAll(ctx)
		}
	}()
}

// wakeAll passes over every control plane once a watch started, since
// what a pass renders and waits for depends on which kinds exist
// (cert-manager's while CertManagerMissing, Cilium's policies, Gateway
// API's): a control plane nothing else wakes would not render them.
func (w *optionalWatches) wakeAll(ctx context.Context) {
	hcps := &v1alpha1.HostedControlPlaneList{}
	if err := w.cache.List(ctx, hcps); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list control planes after a watch of an optional kind started")
		return
	}
	for i := range hcps.Items {
		select {
		case w.woken <- event.TypedGenericEvent[types.NamespacedName]{Object: client.ObjectKeyFromObject(&hcps.Items[i])}:
		case <-ctx.Done():
			return
		}
	}
}

// ofOptionalGroup tells whether the CRD named name (<plural>.<group>) is of
// the group of an optional kind. It reads only the kinds' objects, which
// never change, and so takes no lock.
func (w *optionalWatches) ofOptionalGroup(name string) bool {
	for i := range w.kinds {
		if gvk, err := apiutil.GVKForObject(w.kinds[i].obj, w.client.Scheme()); err == nil && strings.HasSuffix(name, "."+gvk.Group) {
			return true
		}
	}
	return false
}
