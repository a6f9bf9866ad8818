package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
)

// The controller caches what it keeps in each workload cluster in caches
// of its own rather than in the ClusterCache's. Cluster API's ClusterCache
// keeps the connection (the REST config from the kubeconfig Secret, the
// uncached client, the health probe, the cluster source); its informers'
// watches end after 5 to 10 minutes (client-go's default) and cannot be
// asked for longer (its cache's HTTP client times out after 11 minutes and
// it takes no informer options), so an idle control plane cost a watch
// request per kind every few minutes. The caches here ask for long watches
// (longWatches), as the manager's do.

// workloadReadTimeout bounds a read through a workload cache, which may
// wait for an informer to sync (its first read of a kind), as the
// ClusterCache's client does: a pass never waits on a workload cluster
// that does not answer for longer.
const workloadReadTimeout = 10 * time.Second

// workloadCacheOptions are those of a workload cache: only the objects of
// workloadKinds that carry our label (and any kind read without one, such
// as the nodes' metadata), without their managedFields, as the manager's
// (CacheOptions).
func workloadCacheOptions(scheme *runtime.Scheme, mapper meta.RESTMapper) cache.Options {
	ours := cache.ByObject{Label: labels.SelectorFromSet(components.WorkloadLabels())}
	byObject := map[client.Object]cache.ByObject{}
	for _, obj := range workloadKinds() {
		byObject[obj] = ours
	}
	return cache.Options{
		Scheme: scheme, Mapper: mapper, ByObject: byObject,
		DefaultTransform: cache.TransformStripManagedFields(),
		NewInformer:      longWatches,
	}
}

// workloadCaches are the controller's caches of the workload clusters, one
// per connection of the ClusterCache: a new connection (made again after
// failed probes, or with new credentials) gets a new cache, and the cache
// of a connection that is gone is stopped (at the next use, or by sweep).
type workloadCaches struct {
	clusters clustercache.ClusterCache
	scheme   *runtime.Scheme
	// ctx bounds every cache: the controller's run.
	ctx context.Context

	mu        sync.Mutex
	byCluster map[client.ObjectKey]*workloadCache
}

// workloadCache is the cache of one connection to a workload cluster.
type workloadCache struct {
	// config is the connection's, which tells a new connection.
	config *rest.Config
	cache  cache.Cache
	client client.Client
	stop   context.CancelFunc
	// watches are the names of the watches added to cache.
	watches map[string]bool
}

func newWorkloadCaches(ctx context.Context, clusters clustercache.ClusterCache, scheme *runtime.Scheme) *workloadCaches {
	return &workloadCaches{clusters: clusters, scheme: scheme, ctx: ctx, byCluster: map[client.ObjectKey]*workloadCache{}}
}

// of is the cache of cluster's connection, made if there is none yet or
// the connection is new; an error when the ClusterCache has no connection.
func (w *workloadCaches) of(ctx context.Context, cluster client.ObjectKey) (*workloadCache, error) {
	config, err := w.clusters.GetRESTConfig(ctx, cluster)
	w.mu.Lock()
	defer w.mu.Unlock()
	current := w.byCluster[cluster]
	if current != nil && err == nil && current.config == config {
		return current, nil
	}
	if current != nil {
		current.stop()
		delete(w.byCluster, cluster)
	}
	if err != nil {
		return nil, err
	}
	// The connection's REST mapper, which its uncached client uses too.
	live, err := w.clusters.GetUncachedClient(ctx, cluster)
	if err != nil {
		return nil, err
	}
	made, err := w.make(config, live.RESTMapper())
	if err != nil {
		return nil, err
	}
	w.byCluster[cluster] = made
	return made, nil
}

// make starts a cache of the cluster that config reaches. Its informers'
// HTTP client has no overall timeout (a watch lasts watchTimeout); the
// client's writes and uncached reads keep config's.
func (w *workloadCaches) make(config *rest.Config, mapper meta.RESTMapper) (*workloadCache, error) {
	watching := rest.CopyConfig(config)
	watching.Timeout = 0
	opts := workloadCacheOptions(w.scheme, mapper)
	var err error
	if opts.HTTPClient, err = rest.HTTPClientFor(watching); err != nil {
		return nil, err
	}
	c, err := cache.New(watching, opts)
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(config)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(config, client.Options{Scheme: w.scheme, Mapper: mapper, HTTPClient: httpClient, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(w.ctx)
	go func() { _ = c.Start(ctx) }()
	// A read before the cache has started fails (ErrCacheNotStarted), as a
	// pass right after the connection was made would, on a busy machine.
	// Starting asks nothing of the workload cluster (the informers start at
	// their first read), so this waits for a goroutine, not the network.
	starting, cancel := context.WithTimeout(ctx, workloadReadTimeout)
	defer cancel()
	if !c.WaitForCacheSync(starting) {
		stop()
		return nil, errors.New("the controller's cache of the workload cluster did not start")
	}
	return &workloadCache{config: config, cache: c, client: boundedReads{Client: cl}, stop: stop, watches: map[string]bool{}}, nil
}

// watch adds watcher to cluster's cache, once per cache.
func (w *workloadCaches) watch(ctx context.Context, cluster client.ObjectKey, watcher clustercache.Watcher) error {
	c, err := w.of(ctx, cluster)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if c.watches[watcher.Name()] {
		return nil
	}
	if err := watcher.Watch(c.cache); err != nil {
		return err
	}
	c.watches[watcher.Name()] = true
	return nil
}

// sweep stops the caches whose connection is gone: the Cluster deleted,
// or the connection dropped or made again since.
func (w *workloadCaches) sweep(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for cluster, c := range w.byCluster {
		if config, err := w.clusters.GetRESTConfig(ctx, cluster); err != nil || config != c.config {
			c.stop()
			delete(w.byCluster, cluster)
		}
	}
}

// sweepEvery sweeps until ctx ends.
func (w *workloadCaches) sweepEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.sweep(ctx)
		}
	}
}

// boundedReads bounds each read by workloadReadTimeout.
type boundedReads struct{ client.Client }

func (c boundedReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	ctx, cancel := context.WithTimeout(ctx, workloadReadTimeout)
	defer cancel()
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c boundedReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	ctx, cancel := context.WithTimeout(ctx, workloadReadTimeout)
	defer cancel()
	return c.Client.List(ctx, list, opts...)
}
