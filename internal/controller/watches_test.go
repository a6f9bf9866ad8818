package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// The informers of the manager's cache and of the workload caches ask each
// watch for 30 to 60 minutes, where client-go asks for 5 to 10 (their
// first, which streams the initial list, included).
func TestWatchesLastHalfAnHourOrMore(t *testing.T) {
	for name, opts := range map[string]cache.Options{
		"the manager's cache": CacheOptions(Shard{}),
		"a workload's cache":  workloadCacheOptions(runtime.NewScheme(), nil),
	} {
		t.Run(name, func(t *testing.T) {
			require.NotNil(t, opts.NewInformer)
			asked := make(chan metav1.ListOptions, 10)
			lw := &toolscache.ListWatch{
				ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
					return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
				},
				WatchFuncWithContext: func(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
					asked <- opts
					return watch.NewFake(), nil
				},
			}
			informer := opts.NewInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go informer.RunWithContext(ctx)
			select {
			case opts := <-asked:
				require.NotNil(t, opts.TimeoutSeconds)
				got := time.Duration(*opts.TimeoutSeconds) * time.Second
				assert.GreaterOrEqual(t, got, 30*time.Minute)
				assert.Less(t, got, time.Hour)
			case <-time.After(30 * time.Second):
				t.Fatal("no watch")
			}
		})
	}
	for range 100 {
		timeout := time.Duration(watchTimeout()) * time.Second
		assert.True(t, timeout >= 30*time.Minute && timeout < time.Hour, "%s", timeout)
	}
}
