package controller

import (
	"context"
	"math/rand/v2"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// Every cache of the controller (the manager's, the Gateways', each
// workload cluster's) makes its informers with longWatches: each watch asks
// the API server for 30 to 60 minutes (watchTimeout), which is what
// kube-apiserver gives a watch that asks for nothing (--min-request-timeout,
// 1800 s, to twice that), where client-go's informers ask for 5 to 10, whose
// renewals were most of an idle controller's requests: about two a minute
// on the management cluster, and one per kind every few minutes in each
// workload cluster. A watch that breaks earlier is made again at once,
// as before, and client-go's HTTP/2 health check closes a connection that
// stops answering within a minute, so a long watch notices a dead
// connection as soon as a short one did. The HTTP clients of these caches
// have no overall timeout, which would cut the watches short.

// Watch requests last watchTimeoutMin to twice that, spread so that a
// fleet's watches do not all end at once.
const watchTimeoutMin = 30 * time.Minute

// watchTimeout is the timeout a watch of the controller's caches asks for.
func watchTimeout() int64 {
	return int64((watchTimeoutMin + rand.N(watchTimeoutMin)).Seconds()) //nolint:gosec // spreads the watches over time; nothing secret
}

// longWatches is an informer whose watches ask for watchTimeout.
func longWatches(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	inner := toolscache.ToListerWatcherWithContext(lw)
	return toolscache.NewSharedIndexInformer(&toolscache.ListWatch{
		ListWithContextFunc: inner.ListWithContext,
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			timeout := watchTimeout()
			opts.TimeoutSeconds = &timeout
			return inner.WatchWithContext(ctx, opts)
		},
	}, obj, resync, indexers)
}
