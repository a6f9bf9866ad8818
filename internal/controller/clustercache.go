package controller

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// capiProbeInterval is the health probe interval Cluster API's ClusterCache
// hard-codes (v1.14): a requeue no longer than this, of a connected cluster
// whose last probe succeeded, is the wait for its next probe.
const capiProbeInterval = 10 * time.Second

// SetupClusterCache sets up Cluster API's ClusterCache, which connects to
// each workload cluster through its kubeconfig Secret (read by secrets),
// with workers reconciling Clusters of shard, and probes a connection whose
// last probe succeeded every probeInterval instead of Cluster API's ten
// seconds.
//
// The ClusterCache offers no setting for it, so its work queue stretches
// the requeue that waits for the next probe. Only that one: a connection
// that could not be made is tried again every 30 s, and a probe that failed
// is repeated every 10 s until five in a row disconnect, as Cluster API
// does. The trade-off is how soon a connection that died unnoticed is
// dropped and made again (with the kubeconfig Secret's credentials of the
// time): at its next probe, up to probeInterval later, while the
// connection's informers retry their watches meanwhile. A control plane
// whose API server stops answering is still noticed within two minutes by
// the controller's own probe of /readyz, which runs outside the workers and
// sets Available false; and a pass whose request to the workload cluster
// does not reach it or is refused authentication asks for a probe at once
// (see ProbeSoon), so that credentials or a CA rotated under the connection
// are picked up as soon as the pass needs them.
func SetupClusterCache(ctx context.Context, mgr ctrl.Manager, secrets client.Reader, shard Shard,
	workers int, probeInterval time.Duration,
) (*WorkloadCache, error) {
	w := &WorkloadCache{}
	clusters, err := clustercache.SetupWithManager(ctx, mgr, ClusterCacheOptions(secrets, shard), crcontroller.Options{
		MaxConcurrentReconciles: workers,
		NewQueue: func(name string, limiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			q := &probeQueue{
				PriorityQueue: priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
					o.Log = mgr.GetLogger().WithValues("controller", name)
					o.RateLimiter = limiter
				}),
				interval: probeInterval,
				health:   w.health,
				asked:    &w.asked,
				now:      time.Now,
			}
			w.queue.Store(q)
			return q
		},
	})
	if err != nil {
		return nil, err
	}
	w.ClusterCache = clusters
	w.own = newWorkloadCaches(ctx, clusters, mgr.GetScheme())
	w.ready.Store(true)
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		w.own.sweepEvery(ctx, time.Minute)
		return nil
	})); err != nil {
		return nil, err
	}
	return w, nil
}

// WorkloadCache is Cluster API's ClusterCache as SetupClusterCache sets it
// up, with the controller's own caches of the workload clusters (see
// workloadCaches) behind GetClient and Watch.
type WorkloadCache struct {
	clustercache.ClusterCache
	own *workloadCaches
	// ready tells the queue, which may be built before SetupClusterCache
	// returns, that ClusterCache is set.
	ready atomic.Bool
	// queue is the ClusterCache's work queue, once its controller started.
	queue atomic.Pointer[probeQueue]
	// asked holds, per cluster, when ProbeSoon last asked for a probe.
	asked sync.Map
}

// GetClient is a client of cluster whose reads come from the controller's
// cache of its connection.
func (w *WorkloadCache) GetClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error) {
	c, err := w.own.of(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return c.client, nil
}

// Watch adds watcher to the controller's cache of cluster's connection,
// once per connection.
func (w *WorkloadCache) Watch(ctx context.Context, cluster client.ObjectKey, watcher clustercache.Watcher) error {
	return w.own.watch(ctx, cluster, watcher)
}

// ProbeSoon has the ClusterCache probe the connection to cluster now, or,
// when it did within Cluster API's interval (ten seconds), once that
// interval is over: the wait is not stretched until a probe has run since.
// A probe that fails is repeated at Cluster API's pace and drops the
// connection, which is then made again from the kubeconfig Secret.
func (w *WorkloadCache) ProbeSoon(cluster client.ObjectKey) {
	if q := w.queue.Load(); q != nil {
		w.asked.Store(cluster, q.now())
		q.Add(reconcile.Request{NamespacedName: cluster})
	}
}

// health is the health checking state of cluster's connection, and whether
// there is one; none before the ClusterCache is set.
func (w *WorkloadCache) health(cluster client.ObjectKey) (clustercache.HealthCheckingState, bool) {
	if !w.ready.Load() {
		return clustercache.HealthCheckingState{}, false
	}
	ctx := context.Background()
	if _, err := w.GetRESTConfig(ctx, cluster); err != nil {
		return clustercache.HealthCheckingState{}, false
	}
	return w.GetHealthCheckingState(ctx, cluster), true
}

// probeQueue is the ClusterCache's priority queue (controller-runtime's
// default, which its controller uses through AddWithOpts) with the wait for
// the next health probe of a healthy connection stretched to interval.
type probeQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	interval time.Duration
	health   func(client.ObjectKey) (clustercache.HealthCheckingState, bool)
	// asked holds when ProbeSoon last asked to probe a cluster.
	asked *sync.Map
	now   func() time.Time
}

// AddAfter adds item after d, or later when it waits for a probe.
func (q *probeQueue) AddAfter(item reconcile.Request, d time.Duration) {
	q.PriorityQueue.AddAfter(item, q.after(item, d))
}

// AddWithOpts adds items as told, those that wait for a probe later.
func (q *probeQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.RateLimited || o.After <= 0 {
		q.PriorityQueue.AddWithOpts(o, items...)
		return
	}
	for _, item := range items {
		opts := o
		opts.After = q.after(item, o.After)
		q.PriorityQueue.AddWithOpts(opts, item)
	}
}

// after is how long item waits when asked to wait d.
func (q *probeQueue) after(item reconcile.Request, d time.Duration) time.Duration {
	state, connected := q.health(item.NamespacedName)
	if asked, ok := q.asked.Load(item.NamespacedName); ok {
		if !state.LastProbeTime.After(asked.(time.Time)) {
			return d // asked for since the last probe: at Cluster API's pace
		}
		q.asked.CompareAndDelete(item.NamespacedName, asked)
	}
	return nextProbe(d, connected, state, q.interval, q.now())
}

// nextProbe is the wait d the ClusterCache asks for, or, when it is the
// wait for the next probe (at most Cluster API's interval) of a connection
// whose last probe succeeded, the time left until interval after that probe.
func nextProbe(d time.Duration, connected bool, state clustercache.HealthCheckingState, interval time.Duration, now time.Time) time.Duration {
	if d <= 0 || d > capiProbeInterval || !connected || state.ConsecutiveFailures > 0 || state.LastProbeSuccessTime.IsZero() {
		return d
	}
	return max(d, state.LastProbeTime.Add(interval).Sub(now))
}
