package controller

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// A read through a workload cache right after it was made is not refused
// as "the cache is not started" (a pass right after the connection was
// made, on a busy machine). With one processor the goroutine that starts
// the cache runs only when the test's waits, so without the wait in make
// every read here would be refused.
func TestWorkloadCacheReadsAtOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, obj := range workloadKinds() {
		gvk, err := apiutil.GVKForObject(obj, scheme.Scheme)
		require.NoError(t, err)
		scope := meta.RESTScopeNamespace
		if gvk.Kind == "ClusterRole" || gvk.Kind == "ClusterRoleBinding" {
			scope = meta.RESTScopeRoot
		}
		mapper.Add(gvk, scope)
	}
	w := &workloadCaches{ctx: ctx, scheme: scheme.Scheme}
	for range 5 {
		// Nothing answers there: a read waits for its informer to sync
		// until its context ends.
		made, err := w.make(&rest.Config{Host: "https://127.0.0.1:1"}, mapper)
		require.NoError(t, err)
		reading, done := context.WithTimeout(ctx, 50*time.Millisecond)
		err = made.client.Get(reading, client.ObjectKey{Namespace: "kube-public", Name: "cluster-info"}, &corev1.ConfigMap{})
		done()
		made.stop()
		require.Error(t, err)
		var notStarted *cache.ErrCacheNotStarted
		require.False(t, errors.As(err, &notStarted), "read refused: %v", err)
	}
}
