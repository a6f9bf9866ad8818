package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/local"
)

// A hosted etcd changes its members in place while a client writes to the
// hosted API server throughout: 1 → 3 → 5 → 3 members, then a member whose
// pod and volume are deleted comes back as a new member, then the members'
// volumes grow from 1Gi to 2Gi in place (claims, filesystems and quota),
// no member restarting but once for the quota. Every write either
// succeeded or failed with an error a client retries, and every object
// written is still there at the end.
func TestEtcdMembership(t *testing.T) {
	parallel(t)
	ns := namespace(t, "members")
	apply(t, ns, hostedCluster("members", images.KubeVersion, 1, 1))
	key := client.ObjectKey{Namespace: ns, Name: "members"}
	require.NoError(t, local.WaitAvailable(testContext(t), k8s, key, 15*time.Minute))
	hosted, err := kubernetes.NewForConfig(hostedConfig(t, ns, "members"))
	require.NoError(t, err)
	w := startWriter(t, hosted)

	t.Run("scales 1 to 3 to 5 to 3 in place", func(t *testing.T) {
		for _, members := range []int32{3, 5, 3} {
			start := time.Now()
			setEtcdReplicas(t, key, members)
			voters := waitVoters(t, key, members)
			t.Logf("%d healthy voters %s after asking: %v", members, time.Since(start).Round(time.Second), voters)
			// Every member joins on its first start, none restarting on
			// the way (see package join).
			assert.Equal(t, map[string]int32{}, etcdRestarts(t, key), "etcd containers that restarted")
		}
	})

	t.Run("a member that lost its pod and volume is replaced", func(t *testing.T) {
		victim := "members-etcd-1"
		took := replaceMember(t, key, victim)
		t.Logf("3 healthy voters %s after the pod and volume of %s were deleted", took.Round(time.Second), victim)
		// The replacement, on a new volume, joins on its first start: the
		// pod the StatefulSet made after the controller deleted the one
		// whose wait for peers found its data lost (etcd listed it as a
		// voter that has run), where etcd never started.
		assert.Equal(t, map[string]int32{}, etcdRestarts(t, key), "etcd containers that restarted")
		events := &corev1.EventList{}
		require.NoError(t, k8s.List(testContext(t), events, client.InNamespace(ns)))
		replaced := slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.Reason == v1alpha1.EtcdMemberReplacedReason && strings.Contains(e.Message, victim) &&
				strings.Contains(e.Message, "its data directory is empty while etcd lists it as a voter that has run")
		})
		assert.True(t, replaced, "an event tells that %s was replaced as its data was found lost before etcd started", victim)
	})

	t.Run("a flag etcd refuses stops the rollout and deletes nothing", func(t *testing.T) {
		badArgsStopTheRollout(t, key, hosted)
	})

	t.Run("its volumes grow from 1Gi to 2Gi while it runs", func(t *testing.T) {
		took := growVolumes(t, key, "2Gi")
		t.Logf("every volume and filesystem at 2Gi and the quota raised %s after asking", took.Round(time.Second))
	})

	written, failed := w.stop()
	t.Logf("%d objects written, %d writes failed with a retryable error", len(written), len(failed))
	for _, f := range failed {
		t.Log("  " + f)
	}
	ctx := testContext(t)
	list, err := hosted.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{LabelSelector: "e2e=etcd-writer"})
	require.NoError(t, err)
	have := map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = true
	}
	var lost []string
	for _, name := range written {
		if !have[name] {
			lost = append(lost, name)
		}
	}
	assert.Empty(t, lost, "objects written and then lost")
	assert.Greater(t, len(written), 100, "the client wrote throughout")
	deleteClusters(t, key)
}

// badArgsStopTheRollout rolls a flag etcd refuses onto the three healthy
// voters of a control plane: the rollout stops at the first member it
// updates, which crash-loops; EtcdReady says so, naming the member and
// etcd's complaint; no member is removed or replaced and no volume deleted
// while it stays down for longer than a member whose data is lost would be
// replaced after; two members stay healthy. Putting the args back brings
// the member back as itself, on its own volume, and what was written
// before is still there.
func badArgsStopTheRollout(t *testing.T, key client.ObjectKey, hosted kubernetes.Interface) {
	ctx := testContext(t)
	before := waitVoters(t, key, 3)
	claims := claimUIDs(t, key)
	kept, err := hosted.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "before-bad-args"}, Data: map[string]string{"kept": "yes"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	setEtcdArgs(t, key, map[string]string{"snapshot-count": "not-a-number"})

	stuck := key.Name + "-etcd-2" // the StatefulSet updates the highest ordinal first
	var since time.Time
	eventually(t, 5*time.Minute, "EtcdReady says the rollout is stuck at "+stuck, func() error {
		hcp := &v1alpha1.HostedControlPlane{}
		if err := k8s.Get(ctx, key, hcp); err != nil {
			return err
		}
		ready := apimeta.FindStatusCondition(hcp.Status.Conditions, v1alpha1.EtcdReadyCondition)
		if ready == nil || ready.Reason != v1alpha1.EtcdRolloutStuckReason || !strings.Contains(ready.Message, stuck) ||
			!strings.Contains(ready.Message, `invalid value "not-a-number" for flag -snapshot-count`) {
			return fmt.Errorf("EtcdReady %v", ready)
		}
		t.Logf("EtcdReady: %s", ready.Message)
		since = time.Now()
		return nil
	})
	// Longer than a member whose data etcd refuses stays down before it is
	// replaced: nothing may go meanwhile.
	for time.Since(since) < 90*time.Second {
		assert.Equal(t, claims, claimUIDs(t, key), "no claim deleted")
		hcp := &v1alpha1.HostedControlPlane{}
		require.NoError(t, k8s.Get(ctx, key, hcp))
		members := map[string]string{}
		for _, m := range hcp.Status.Etcd.MemberStatuses {
			members[m.Name] = m.ID
		}
		assert.Equal(t, before, members, "no member removed or replaced")
		assert.Len(t, voters(t, key), 2, "two members stay healthy")
		time.Sleep(10 * time.Second)
	}
	events := &corev1.EventList{}
	require.NoError(t, k8s.List(ctx, events, client.InNamespace(key.Namespace)))
	assert.True(t, slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
		return e.Reason == v1alpha1.EtcdRolloutStuckReason && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, stuck)
	}), "a Warning event tells the rollout is stuck")
	assert.False(t, slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
		return e.Reason == v1alpha1.EtcdMemberReplacedReason && strings.Contains(e.Message, stuck)
	}), "no replacement of %s", stuck)

	setEtcdArgs(t, key, nil)
	assert.Equal(t, before, waitVoters(t, key, 3), "the same three members, none replaced")
	assert.Equal(t, claims, claimUIDs(t, key), "on the same volumes")
	got, err := hosted.CoreV1().ConfigMaps("default").Get(ctx, kept.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "yes", got.Data["kept"])
}

// setEtcdArgs sets spec.etcd.args.
func setEtcdArgs(t testing.TB, key client.ObjectKey, args map[string]string) {
	t.Helper()
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(testContext(t), key, hcp))
	patch := client.MergeFrom(hcp.DeepCopy())
	hcp.Spec.Etcd.Args = args
	require.NoError(t, k8s.Patch(testContext(t), hcp, patch))
}

// claimUIDs are the UIDs of the etcd members' volume claims, by name.
func claimUIDs(t testing.TB, key client.ObjectKey) map[string]types.UID {
	t.Helper()
	claims := &corev1.PersistentVolumeClaimList{}
	require.NoError(t, k8s.List(testContext(t), claims, client.InNamespace(key.Namespace),
		client.MatchingLabels{contract.ControlPlaneLabel: key.Name, contract.ComponentLabel: contract.EtcdComponent}))
	uids := map[string]types.UID{}
	for _, c := range claims.Items {
		uids[c.Name] = c.UID
	}
	return uids
}

// replaceMember deletes the pod and volume of member victim of a control
// plane of three healthy voters, waits until a new member of its name is
// one of three healthy voters again, and returns how long that took.
func replaceMember(t testing.TB, key client.ObjectKey, victim string) time.Duration {
	t.Helper()
	before := waitVoters(t, key, 3)
	ctx := testContext(t)
	start := time.Now()
	require.NoError(t, k8s.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: "data-" + victim}}))
	require.NoError(t, k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: victim}}))
	eventually(t, 10*time.Minute, "member "+victim+" replaced by a new one", func() error {
		after := voters(t, key)
		if len(after) == 3 && after[victim] != "" && after[victim] != before[victim] {
			return nil
		}
		return fmt.Errorf("voters %v (before: %v)", after, before)
	})
	return time.Since(start)
}

// etcdRestarts are the etcd pods of a control plane whose etcd container
// restarted, and how often; what it waits for (its last state) is logged,
// and what each pod's wait-for-peers waited for.
func etcdRestarts(t testing.TB, key client.ObjectKey) map[string]int32 {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, k8s.List(testContext(t), pods, client.InNamespace(key.Namespace), client.MatchingLabels{
		contract.ControlPlaneLabel: key.Name, contract.ComponentLabel: contract.EtcdComponent,
	}))
	out := map[string]int32{}
	for _, p := range pods.Items {
		for _, s := range p.Status.InitContainerStatuses {
			if s.Name == "wait-for-peers" {
				raw, err := clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: s.Name}).DoRaw(testContext(t))
				if err != nil {
					raw = []byte(err.Error())
				}
				t.Logf("%s wait-for-peers (restarted %d times): %s", p.Name, s.RestartCount, raw)
			}
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "etcd" && s.RestartCount > 0 {
				out[p.Name] = s.RestartCount
				if term := s.LastTerminationState.Terminated; term != nil {
					t.Logf("%s restarted %d times, last: exit %d %s: %s", p.Name, s.RestartCount, term.ExitCode, term.Reason, term.Message)
				}
			}
		}
	}
	return out
}

// setEtcdReplicas sets spec.etcd.replicas, with the consent a scale-down
// needs.
func setEtcdReplicas(t testing.TB, key client.ObjectKey, replicas int32) {
	t.Helper()
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(testContext(t), key, hcp))
	patch := client.MergeFrom(hcp.DeepCopy())
	hcp.Spec.Etcd.Replicas = &replicas
	if hcp.Annotations == nil {
		hcp.Annotations = map[string]string{}
	}
	hcp.Annotations[v1alpha1.AllowEtcdScaleDownAnnotation] = "true"
	require.NoError(t, k8s.Patch(testContext(t), hcp, patch))
}

// waitVoters waits until the status reports n healthy voters and no other
// member, with EtcdReady true, and returns their IDs by name.
func waitVoters(t testing.TB, key client.ObjectKey, n int32) map[string]string {
	t.Helper()
	var ids map[string]string
	eventually(t, 10*time.Minute, fmt.Sprintf("%d healthy etcd voters", n), func() error {
		ids = voters(t, key)
		hcp := &v1alpha1.HostedControlPlane{}
		if err := k8s.Get(testContext(t), key, hcp); err != nil {
			return err
		}
		ready := apimeta.FindStatusCondition(hcp.Status.Conditions, v1alpha1.EtcdReadyCondition)
		if len(ids) != int(n) || len(hcp.Status.Etcd.MemberStatuses) != int(n) || ready == nil ||
			ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != hcp.Generation {
			return fmt.Errorf("members %v, EtcdReady %v", hcp.Status.Etcd.MemberStatuses, ready)
		}
		return nil
	})
	return ids
}

// voters are the healthy voting members the status reports, their IDs by
// name.
func voters(t testing.TB, key client.ObjectKey) map[string]string {
	t.Helper()
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(testContext(t), key, hcp))
	ids := map[string]string{}
	for _, m := range hcp.Status.Etcd.MemberStatuses {
		if m.Role == v1alpha1.EtcdVoter && m.Healthy {
			ids[m.Name] = m.ID
		}
	}
	return ids
}

// writer creates ConfigMaps in the hosted cluster one after another until
// stopped, remembering those created and the failures.
type writer struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	written []string
	failed  []string
	t       *testing.T
}

func startWriter(t *testing.T, hosted kubernetes.Interface) *writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cancel: cancel, t: t}
	w.wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			name := fmt.Sprintf("w-%05d", i)
			call, done := context.WithTimeout(ctx, 15*time.Second)
			_, err := hosted.CoreV1().ConfigMaps("default").Create(call, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"e2e": "etcd-writer"}},
			}, metav1.CreateOptions{})
			done()
			switch {
			case err == nil:
				w.written = append(w.written, name)
			case ctx.Err() != nil:
				return
			default:
				w.failed = append(w.failed, time.Now().Format(time.StampMilli)+" "+name+": "+err.Error())
				if !retryable(err) {
					t.Errorf("write %s failed with an error a client does not retry: %v", name, err)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return w
}

// stop stops the writer and returns what it wrote and what failed.
func (w *writer) stop() (written, failed []string) {
	w.cancel()
	w.wg.Wait()
	return w.written, w.failed
}

// retryable tells whether a client retries the error: the API server's
// answers while etcd elects a leader or a request to it times out.
func retryable(err error) bool {
	if apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) {
		return true
	}
	msg := err.Error()
	for _, etcdSays := range []string{"etcdserver: leader changed", "etcdserver: request timed out", "etcdserver: no leader", "context deadline exceeded"} {
		if strings.Contains(msg, etcdSays) {
			return true
		}
	}
	return false
}

// growVolumes raises spec.etcd.volumeSize of a control plane of three
// healthy voters to size, and waits until every member's claim and the
// filesystem on its volume (the host path of its PersistentVolume, where
// the pod's volume is mounted) have grown, the quota follows and the three
// voters are healthy again. No member restarts except once, for the quota.
// It returns how long that took.
func growVolumes(t testing.TB, key client.ObjectKey, size string) time.Duration {
	t.Helper()
	waitVoters(t, key, 3)
	ctx := testContext(t)
	want := resource.MustParse(size)
	uids := map[string]map[types.UID]bool{}
	seePods := func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(key.Namespace),
			client.MatchingLabels{contract.ControlPlaneLabel: key.Name, contract.ComponentLabel: contract.EtcdComponent}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if uids[p.Name] == nil {
				uids[p.Name] = map[types.UID]bool{}
			}
			uids[p.Name][p.UID] = true
		}
		return nil
	}
	require.NoError(t, seePods())
	start := time.Now()
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(ctx, key, hcp))
	patch := client.MergeFrom(hcp.DeepCopy())
	hcp.Spec.Etcd.VolumeSize = &want
	require.NoError(t, k8s.Patch(ctx, hcp, patch))
	eventually(t, 10*time.Minute, "etcd's volumes grown to "+size, func() error {
		if err := seePods(); err != nil {
			return err
		}
		return volumesGrown(ctx, key, 3, want)
	})
	waitVoters(t, key, 3)
	took := time.Since(start)
	require.NoError(t, seePods())
	for name, seen := range uids {
		assert.LessOrEqual(t, len(seen), 2, "pod %s restarted only for the quota", name)
	}
	require.NoError(t, k8s.Get(ctx, key, hcp))
	assert.Equal(t, size, hcp.Status.Etcd.VolumeSize.String())
	if assert.NotNil(t, hcp.Status.Etcd.VolumeUsage, "status.etcd.volumeUsage") {
		assert.Positive(t, hcp.Status.Etcd.VolumeUsage.Value())
		t.Logf("status.etcd.volumeUsage %s", hcp.Status.Etcd.VolumeUsage)
	}
	assert.True(t, apimeta.IsStatusConditionTrue(hcp.Status.Conditions, v1alpha1.AvailableCondition), "the control plane stays Available")
	return took
}

// volumesGrown tells whether the claims of the n members of a control plane
// and the filesystems on their volumes (the host path of each
// PersistentVolume, where the pod's volume is mounted) hold want, and the
// StatefulSet runs the quota of that size.
func volumesGrown(ctx context.Context, key client.ObjectKey, n int, want resource.Quantity) error {
	for i := range n {
		claim := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: fmt.Sprintf("data-%s-etcd-%d", key.Name, i)}, claim); err != nil {
			return err
		}
		if claim.Status.Capacity.Storage().Cmp(want) < 0 {
			return fmt.Errorf("claim %s has %s", claim.Name, claim.Status.Capacity.Storage())
		}
		pv := &corev1.PersistentVolume{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, pv); err != nil {
			return err
		}
		var fs syscall.Statfs_t
		if err := syscall.Statfs(pv.Spec.HostPath.Path, &fs); err != nil {
			return err
		}
		// XFS keeps a few percent for its log and metadata.
		if got := int64(fs.Blocks) * fs.Bsize; got < want.Value()*9/10 {
			return fmt.Errorf("the filesystem of %s holds %d MiB", claim.Name, got>>20)
		}
	}
	quota := "--" + contract.EtcdQuotaFlag + "=" + strconv.FormatInt(contract.EtcdQuota(want), 10)
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name + "-etcd"}, sts); err != nil {
		return err
	}
	if !slices.Contains(sts.Spec.Template.Spec.Containers[0].Args, quota) {
		return fmt.Errorf("the StatefulSet does not run %s yet", quota)
	}
	return nil
}
