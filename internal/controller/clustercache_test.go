package controller

import (
	"cmp"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Only the wait for the next probe of a connected cluster whose last probe
// succeeded is stretched, to interval after that probe; connection retries,
// failing probes and everything else keep Cluster API's timing.
func TestNextProbe(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	healthy := clustercache.HealthCheckingState{LastProbeTime: now.Add(-2 * time.Second), LastProbeSuccessTime: now.Add(-2 * time.Second)}
	failing := clustercache.HealthCheckingState{LastProbeTime: now, LastProbeSuccessTime: now.Add(-time.Minute), ConsecutiveFailures: 1}
	for name, tc := range map[string]struct {
		d         time.Duration
		connected bool
		state     clustercache.HealthCheckingState
		interval  time.Duration
		want      time.Duration
	}{
		"healthy, after a probe":      {d: 10 * time.Second, connected: true, state: healthy, want: 5*time.Minute - 2*time.Second},
		"healthy, probed moments ago": {d: 8 * time.Second, connected: true, state: healthy, want: 5*time.Minute - 2*time.Second},
		"connection retry":            {d: 30 * time.Second, connected: true, state: healthy, want: 30 * time.Second},
		"not connected":               {d: 10 * time.Second, state: healthy, want: 10 * time.Second},
		"last probe failed":           {d: 10 * time.Second, connected: true, state: failing, want: 10 * time.Second},
		"never probed":                {d: 10 * time.Second, connected: true, want: 10 * time.Second},
		"immediately":                 {d: time.Millisecond, connected: false, state: healthy, want: time.Millisecond},
		"interval already over":       {d: 10 * time.Second, connected: true, state: clustercache.HealthCheckingState{LastProbeTime: now.Add(-time.Hour), LastProbeSuccessTime: now.Add(-time.Hour)}, want: 10 * time.Second},
		"no wait asked":               {connected: true, state: healthy, want: 0},
		"Cluster API's own interval":  {d: 10 * time.Second, connected: true, state: healthy, interval: 10 * time.Second, want: 10 * time.Second},
	} {
		interval := cmp.Or(tc.interval, 5*time.Minute)
		assert.Equal(t, tc.want, nextProbe(tc.d, tc.connected, tc.state, interval, now), name)
	}
}

// recordingQueue records what reaches the priority queue beneath.
type recordingQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	added []priorityqueue.AddOpts
	after []time.Duration
	now   []reconcile.Request
}

func (r *recordingQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	for range items {
		r.added = append(r.added, o)
	}
}

func (r *recordingQueue) AddAfter(_ reconcile.Request, d time.Duration) { r.after = append(r.after, d) }

func (r *recordingQueue) Add(item reconcile.Request) { r.now = append(r.now, item) }

// Both ways a controller requeues after a while are stretched: AddWithOpts,
// which controller-runtime's controller uses with a priority queue, and
// AddAfter; rate-limited adds and adds without a wait pass unchanged, and
// the ClusterCache is asked about each cluster.
func TestProbeQueueStretchesBothPaths(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	good := types.NamespacedName{Namespace: "tenants", Name: "good"}
	bad := types.NamespacedName{Namespace: "tenants", Name: "bad"}
	rec := &recordingQueue{}
	health := func(key client.ObjectKey) (clustercache.HealthCheckingState, bool) {
		if key == good {
			return clustercache.HealthCheckingState{LastProbeTime: now, LastProbeSuccessTime: now}, true
		}
		return clustercache.HealthCheckingState{LastProbeTime: now, ConsecutiveFailures: 2}, true
	}
	q := &probeQueue{PriorityQueue: rec, interval: time.Minute, health: health, asked: &sync.Map{}, now: func() time.Time { return now }}
	high := 1
	q.AddWithOpts(priorityqueue.AddOpts{After: 10 * time.Second, Priority: &high}, reconcile.Request{NamespacedName: good}, reconcile.Request{NamespacedName: bad})
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, reconcile.Request{NamespacedName: good})
	q.AddWithOpts(priorityqueue.AddOpts{}, reconcile.Request{NamespacedName: good})
	q.AddAfter(reconcile.Request{NamespacedName: good}, 10*time.Second)
	q.AddAfter(reconcile.Request{NamespacedName: bad}, 10*time.Second)
	assert.Equal(t, []priorityqueue.AddOpts{
		{After: time.Minute, Priority: &high}, {After: 10 * time.Second, Priority: &high}, {RateLimited: true}, {},
	}, rec.added)
	assert.Equal(t, []time.Duration{time.Minute, 10 * time.Second}, rec.after)
}

// Until the ClusterCache is set, no cluster counts as connected, and
// before its controller starts nothing is probed.
func TestWorkloadCacheBeforeItIsSet(t *testing.T) {
	w := &WorkloadCache{}
	_, connected := w.health(client.ObjectKey{Namespace: "tenants", Name: "a"})
	assert.False(t, connected)
	w.ProbeSoon(client.ObjectKey{Namespace: "tenants", Name: "a"})
}

// ProbeSoon queues the cluster's Cluster at once, for the ClusterCache to
// probe. When the ClusterCache probed it within ten seconds and so waits
// for the rest of them, that wait is not stretched: the probe asked for
// runs then. Once a probe has run since, the wait is stretched again.
func TestProbeSoon(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	key := client.ObjectKey{Namespace: "tenants", Name: "a"}
	state := clustercache.HealthCheckingState{LastProbeTime: now.Add(-3 * time.Second), LastProbeSuccessTime: now.Add(-3 * time.Second)}
	rec := &recordingQueue{}
	w := &WorkloadCache{}
	w.queue.Store(&probeQueue{
		PriorityQueue: rec, interval: 5 * time.Minute, asked: &w.asked, now: func() time.Time { return now },
		health: func(client.ObjectKey) (clustercache.HealthCheckingState, bool) { return state, true },
	})
	q := w.queue.Load()
	w.ProbeSoon(key)
	assert.Equal(t, []reconcile.Request{{NamespacedName: key}}, rec.now)

	// The ClusterCache probed 3 s ago: it asks to wait 7 s, and waits that.
	q.AddAfter(reconcile.Request{NamespacedName: key}, 7*time.Second)
	other := client.ObjectKey{Namespace: "tenants", Name: "b"}
	q.AddAfter(reconcile.Request{NamespacedName: other}, 7*time.Second)
	assert.Equal(t, []time.Duration{7 * time.Second, 5*time.Minute - 3*time.Second}, rec.after, "only the cluster asked about keeps Cluster API's pace")

	// It probed after the ask: the next wait is stretched again.
	now = now.Add(7 * time.Second)
	state = clustercache.HealthCheckingState{LastProbeTime: now, LastProbeSuccessTime: now}
	q.AddAfter(reconcile.Request{NamespacedName: key}, 10*time.Second)
	assert.Equal(t, 5*time.Minute, rec.after[2])
	_, stillAsked := w.asked.Load(key)
	assert.False(t, stillAsked, "the ask is forgotten once a probe ran")
}

// What a connection gets whose credentials or CA were rotated under it asks
// for a probe; the API server's other answers do not.
func TestConnectionFailed(t *testing.T) {
	untrusted := &url.Error{Op: "Get", URL: "https://192.0.2.10:6443/api", Err: x509.UnknownAuthorityError{}}
	gr := schema.GroupResource{Resource: "configmaps"}
	assert.True(t, connectionFailed(untrusted))
	assert.True(t, connectionFailed(fmt.Errorf("apply ConfigMap kube-system/coredns: %w", untrusted)))
	assert.True(t, connectionFailed(apierrors.NewUnauthorized("Unauthorized")))
	assert.False(t, connectionFailed(apierrors.NewNotFound(gr, "coredns")))
	assert.False(t, connectionFailed(apierrors.NewConflict(gr, "coredns", errors.New("changed"))))
	assert.False(t, connectionFailed(errors.New("the endpoint is a loopback address")))
}
