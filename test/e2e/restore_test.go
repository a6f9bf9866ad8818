package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/local"
)

// changedAfterSnapshot is how many ConfigMaps restoredInPlace writes, and
// how many it deletes, after the snapshot.
const changedAfterSnapshot = 20

// restoredInPlace changes the Cluster's ConfigMaps after the snapshot
// snapshotLands took (writes new ones, deletes some of the others), restores
// etcd in place from that snapshot as the README shows, and checks that the
// ConfigMaps are exactly the snapshot's again, and that a client that
// watched them throughout never saw a resourceVersion go backwards, but was
// told to list again.
func restoredInPlace(t *testing.T, key client.ObjectKey) {
	ctx := testContext(t)
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(ctx, key, hcp))
	snapshot := hcp.Status.Etcd.LastBackupKey
	cfg := hostedConfig(t, key.Namespace, key.Name)
	cfg.QPS, cfg.Burst = 100, 100
	hosted, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	for i := range changedAfterSnapshot {
		_, err := hosted.CoreV1().ConfigMaps("bk").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("after-%d", i)}, Data: map[string]string{"content": "after"},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, hosted.CoreV1().ConfigMaps("bk").Delete(ctx, fmt.Sprintf("cm-%04d", i), metav1.DeleteOptions{}))
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	seen := watchConfigMaps(watchCtx, hosted, "bk")

	restoreEtcdInPlace(t, key, snapshot)

	// The snapshot's ConfigMaps, deleted after it or not, and none written
	// after it.
	rv := writtenConfigMapsAre(t, hosted, backupConfigMaps)

	// The watcher catches up with the restored cluster: it sees a ConfigMap
	// written now (bookmarks alone come about once a minute), then stops.
	listed, err := strconv.ParseInt(rv, 10, 64)
	require.NoError(t, err)
	marker, err := hosted.CoreV1().ConfigMaps("bk").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-restore"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	written, err := strconv.ParseInt(marker.ResourceVersion, 10, 64)
	require.NoError(t, err)
	eventually(t, time.Minute, "the watcher sees a ConfigMap written after the restore", func() error {
		if last := seen.last(); last < written {
			return fmt.Errorf("the watcher is at resourceVersion %d, the ConfigMap written after the restore at %d", last, written)
		}
		return nil
	})
	stopWatching()
	require.NoError(t, hosted.CoreV1().ConfigMaps("bk").Delete(ctx, marker.Name, metav1.DeleteOptions{}))
	versions, relists := seen.result()
	t.Logf("the watcher saw %d resourceVersions, from %d to %d, and was told to list again %d times", len(versions), versions[0], versions[len(versions)-1], relists)
	for i := 1; i < len(versions); i++ {
		require.GreaterOrEqual(t, versions[i], versions[i-1], "resourceVersion %d came after %d", versions[i], versions[i-1])
	}
	assert.Greater(t, listed, int64(contract.EtcdRevisionBump), "revisions moved on past the bump")
	assert.Positive(t, relists, "the watch from before the restore was refused as too old, and the watcher listed again")
}

// restoreEtcdInPlace asks, as the README shows, for the Cluster's etcd to be
// restored in place from snapshot, and waits until it was and the control
// plane is Available again; EtcdRestored names each step on the way, as a
// watch of the control plane sees every change of it.
func restoreEtcdInPlace(t *testing.T, key client.ObjectKey, snapshot string) {
	ctx := testContext(t)
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(ctx, key, hcp))
	start := time.Now()
	watchCtx, stopWatching := context.WithCancel(ctx)
	seen := watchRestoreSteps(watchCtx, t, hcp, start)
	defer seen.stop() // after stopWatching: nothing logs once the test ended
	defer stopWatching()
	before := hcp.DeepCopy()
	if hcp.Annotations == nil {
		hcp.Annotations = map[string]string{}
	}
	hcp.Annotations[v1alpha1.RestoreEtcdAnnotation] = snapshot
	require.NoError(t, k8s.Patch(ctx, hcp, client.MergeFrom(before)))
	eventually(t, 10*time.Minute, "etcd restored in place", func() error {
		if err := k8s.Get(ctx, key, hcp); err != nil {
			return err
		}
		if from := hcp.Status.Etcd.RestoredFrom; from == nil || from.ID == "" || hcp.Status.Etcd.Restoring != nil || !conditions.IsTrue(hcp, v1alpha1.EtcdRestoredCondition) {
			return fmt.Errorf("not restored in place yet: %+v", conditions.Get(hcp, v1alpha1.EtcdRestoredCondition))
		}
		return nil
	})
	// The Cluster's RemoteConnectionProbe (Cluster API's own probe) can stay
	// False until the Cluster controller's next pass, up to its sync period
	// of 10 minutes: its ClusterCache sends no event when a probe succeeds
	// again after the grace period (50 s) ran out without five failures in a
	// row (which would have dropped the connection and sent one when it is
	// made again), and an API server outage of about a minute, the restore's,
	// can end in that window (Cluster API v1.14.2, clustercache's
	// shouldSendEvent).
	require.NoError(t, local.WaitAvailable(ctx, k8s, key, 12*time.Minute))
	t.Logf("restored in place from %s and Available %s after asking", snapshot, time.Since(start).Round(time.Second))
	assert.Equal(t, snapshot, hcp.Status.Etcd.RestoredFrom.Key)
	assert.NotContains(t, hcp.Annotations, v1alpha1.RestoreEtcdAnnotation, "the request was taken")
	stopWatching()
	steps := seen.stop()
	require.NotEmpty(t, steps)
	assert.Equal(t, v1alpha1.StoppingForRestoreReason, steps[0], "EtcdRestored named each step: %q", steps)
	assert.Contains(t, steps, v1alpha1.RestoringReason, "EtcdRestored named each step: %q", steps)
	assert.Equal(t, v1alpha1.ReadyReason, steps[len(steps)-1], "EtcdRestored named each step: %q", steps)
}

// restoreSteps are the reasons EtcdRestored took, in order.
type restoreSteps struct {
	mu      sync.Mutex
	reasons []string
	done    chan struct{}
}

// watchRestoreSteps records each reason EtcdRestored takes after the one
// hcp shows, until ctx ends, logging it with the time
// since start. A watch, unlike a poll, sees a step however short it is. It
// lists first and watches from the list's resourceVersion, not the
// object's: a control plane unchanged for a while has a resourceVersion
// the API server's watch cache may have dropped (410 Gone). On an error it
// lists again, so a step is missed only if it came and went in between.
func watchRestoreSteps(ctx context.Context, t *testing.T, hcp *v1alpha1.HostedControlPlane, start time.Time) *restoreSteps {
	w, err := client.NewWithWatch(mgmt.REST, client.Options{Scheme: k8s.Scheme()})
	require.NoError(t, err)
	s := &restoreSteps{done: make(chan struct{})}
	selected := []client.ListOption{client.InNamespace(hcp.Namespace), client.MatchingFields{"metadata.name": hcp.Name}}
	last := ""
	if c := conditions.Get(hcp, v1alpha1.EtcdRestoredCondition); c != nil {
		last = c.Reason + ": " + c.Message
	}
	// see records the step seen shows, if it is a new one.
	see := func(seen *v1alpha1.HostedControlPlane) {
		c := conditions.Get(seen, v1alpha1.EtcdRestoredCondition)
		if c == nil || c.Reason+": "+c.Message == last {
			return
		}
		last = c.Reason + ": " + c.Message
		s.mu.Lock()
		defer s.mu.Unlock()
		if n := len(s.reasons); n == 0 || s.reasons[n-1] != c.Reason {
			s.reasons = append(s.reasons, c.Reason)
			t.Logf("%s after asking: EtcdRestored %s: %s", time.Since(start).Round(time.Second), c.Reason, c.Message)
		}
	}
	// list sees the control plane as listed now and returns the
	// resourceVersion to watch from.
	list := func() string {
		for ctx.Err() == nil {
			listed := &v1alpha1.HostedControlPlaneList{}
			if err := w.List(ctx, listed, selected...); err != nil {
				t.Logf("list the control plane: %v", err)
				time.Sleep(time.Second)
				continue
			}
			for i := range listed.Items {
				see(&listed.Items[i])
			}
			return listed.ResourceVersion
		}
		return ""
	}
	rv := list()
	go func() {
		defer close(s.done)
		for ctx.Err() == nil {
			watcher, err := w.Watch(ctx, &v1alpha1.HostedControlPlaneList{}, append(selected, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})...)
			if err != nil {
				t.Logf("watch the control plane: %v", err)
				time.Sleep(time.Second)
				rv = list()
				continue
			}
			for ev := range watcher.ResultChan() {
				seen, ok := ev.Object.(*v1alpha1.HostedControlPlane)
				if !ok {
					// An error (410 Gone, say): list again and watch from there.
					if ctx.Err() == nil {
						t.Logf("the watch of the control plane ended: %s %v", ev.Type, ev.Object)
						rv = list()
					}
					break
				}
				rv = seen.ResourceVersion
				see(seen)
			}
			watcher.Stop()
		}
	}()
	return s
}

// stop waits until the watch ended (its context must be done) and returns
// the reasons seen.
func (s *restoreSteps) stop() []string {
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reasons
}

// seenVersions are the resourceVersions a watcher saw, in order, and how
// often it had to list again.
type seenVersions struct {
	mu       sync.Mutex
	versions []int64
	relists  int
}

func (s *seenVersions) add(rv string) {
	v, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions = append(s.versions, v)
}

func (s *seenVersions) last() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.versions) == 0 {
		return 0
	}
	return s.versions[len(s.versions)-1]
}

func (s *seenVersions) result() ([]int64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versions, s.relists
}

// watchConfigMaps lists and watches the ConfigMaps of ns as an informer
// does, until ctx ends: it resumes a broken watch from the last
// resourceVersion it saw, and lists again only when told that one is too old.
func watchConfigMaps(ctx context.Context, hosted kubernetes.Interface, ns string) *seenVersions {
	seen := &seenVersions{}
	expired := func() {
		seen.mu.Lock()
		seen.relists++
		seen.mu.Unlock()
	}
	go func() {
		rv := ""
		for ctx.Err() == nil {
			if rv == "" {
				list, err := hosted.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					time.Sleep(time.Second)
					continue
				}
				rv = list.ResourceVersion
				seen.add(rv)
			}
			w, err := hosted.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					rv = ""
					expired()
				}
				time.Sleep(time.Second)
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					if err := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
						rv = ""
						expired()
					}
					break
				}
				if obj, err := meta.Accessor(ev.Object); err == nil {
					rv = obj.GetResourceVersion()
					seen.add(rv)
				}
			}
			w.Stop()
		}
	}()
	return seen
}
