package extension

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/backup"
)

// greedyControlPlanes is how many control planes the greedy tenant asks
// snapshots of at once.
const greedyControlPlanes = 5

// TestBackupsServeTenantsInTurn runs the backup controller with one
// snapshot slot, as a platform that sets MAX_CONCURRENT_BACKUPS=1 does. A
// greedy tenant asks for snapshots of five control planes at once; a normal
// tenant then asks for one of its single control plane. The normal tenant's
// snapshot starts after at most one more of the greedy tenant's, not after
// all of them. Then the normal tenant asks again at once and is held to the
// minimum interval: its request waits, and an event says until when.
func TestBackupsServeTenantsInTurn(t *testing.T) {
	ctx := testContext(t)
	greedy, normal := namespace(t), namespace(t)
	s3 := startS3(t)
	require.NoError(t, s3.client.MakeBucket(ctx, testBucket, minio.MakeBucketOptions{}))
	backups := v1alpha1.EtcdBackup{Schedule: "0 0 1 1 *", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}
	var greedyKeys []types.NamespacedName
	for _, ns := range []string{greedy, normal} {
		require.NoError(t, k8s.Create(ctx, s3.backupSecret(ns, testBucket)))
	}
	for i := range greedyControlPlanes {
		name := fmt.Sprintf("greedy-%d", i)
		db := startEtcdOf(t, name, greedy, 1, 1)
		db.publish()
		// Enough data that each snapshot takes a while.
		writeLargeValues(t, db, 24)
		greedyKeys = append(greedyKeys, client.ObjectKeyFromObject(backedUpControlPlane(t, greedy, name, name, backups)))
	}
	db := startEtcdOf(t, "normal", normal, 1, 1)
	db.publish()
	normalKey := client.ObjectKeyFromObject(backedUpControlPlane(t, normal, "normal", "normal", backups))

	opts := testOptions(10 * time.Second)
	opts.MaxConcurrent, opts.MinInterval = 1, time.Hour
	startBackupsIn(t, opts, io.Discard, greedy, normal)
	// Once the controller holds them all, the requests are the only work.
	eventually(t, time.Minute, "the backup finalizer on every control plane", func() error {
		for _, key := range append(slices.Clone(greedyKeys), normalKey) {
			hcp := &v1alpha1.HostedControlPlane{}
			require.NoError(t, k8s.Get(ctx, key, hcp))
			if !slices.Contains(hcp.Finalizers, backup.Finalizer) {
				return fmt.Errorf("%s has no finalizer yet", key)
			}
		}
		return nil
	})
	for _, key := range greedyKeys {
		askForSnapshot(t, key)
	}
	normalAsked := time.Now()
	askForSnapshot(t, normalKey)

	started := map[types.NamespacedName]time.Time{}
	eventually(t, 2*time.Minute, "every snapshot asked for", func() error {
		for _, key := range append(slices.Clone(greedyKeys), normalKey) {
			hcp := &v1alpha1.HostedControlPlane{}
			require.NoError(t, k8s.Get(ctx, key, hcp))
			if hcp.Status.Etcd.LastBackupKey == "" {
				return fmt.Errorf("%s has no snapshot yet", key)
			}
			started[key] = snapshotStart(t, hcp.Status.Etcd.LastBackupKey)
		}
		return nil
	})
	var before []string
	for _, key := range greedyKeys {
		if started[key].After(normalAsked) && started[key].Before(started[normalKey]) {
			before = append(before, key.Name)
		}
	}
	require.LessOrEqual(t, len(before), 1,
		"the normal tenant waited behind more than one of the greedy tenant's snapshots: %v (started: %v)", before, started)

	// Asked again at once: held to the minimum interval.
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(ctx, normalKey, hcp))
	last := hcp.Status.Etcd.LastBackupTime.Time
	askForSnapshot(t, normalKey)
	eventually(t, 30*time.Second, "the request deferred", func() error {
		events := &eventsv1.EventList{}
		require.NoError(t, k8s.List(ctx, events, client.InNamespace(normal)))
		for _, e := range events.Items {
			if e.Regarding.Name == "normal" && e.Reason == "BackupDeferred" && e.Type == corev1.EventTypeNormal {
				want := "is taken at " + last.Add(time.Hour).UTC().Format(time.RFC3339) +
					": the platform allows one snapshot of a control plane every 1h0m0s (MIN_BACKUP_INTERVAL)"
				if !strings.Contains(e.Note, want) {
					return fmt.Errorf("event %q does not say %q", e.Note, want)
				}
				return nil
			}
		}
		return fmt.Errorf("no BackupDeferred event among %d", len(events.Items))
	})
	// The event is recorded before the pass writes the status.
	eventually(t, 30*time.Second, "status.etcd.nextBackupTime of the deferred request", func() error {
		require.NoError(t, k8s.Get(ctx, normalKey, hcp))
		if next := hcp.Status.Etcd.NextBackupTime; next == nil || !last.Add(time.Hour).Equal(next.Time) {
			return fmt.Errorf("the next snapshot is due at %v, not once the minimum passed (%v)", next, last.Add(time.Hour))
		}
		return nil
	})
	require.Contains(t, hcp.Annotations, v1alpha1.BackupNowAnnotation, "the request stays until it is served")
	require.True(t, last.Equal(hcp.Status.Etcd.LastBackupTime.Time), "no snapshot was taken")
}

// snapshotStart is when a snapshot began, to the millisecond, as its key
// says.
func snapshotStart(t *testing.T, key string) time.Time {
	t.Helper()
	base := key[strings.LastIndex(key, "/")+1:]
	at, err := time.Parse("20060102T150405.000Z", strings.SplitN(base, "-rev", 2)[0])
	require.NoError(t, err, key)
	return at
}

// TestBackupsHeldToTheMinimumInterval runs a schedule of every second, as a
// control plane stored before admission knew MIN_BACKUP_INTERVAL may have
// (this suite's admission sets no minimum), under a minimum of three
// seconds: its snapshots start three seconds apart, counted from the second
// the last began (status.etcd.lastBackupTime keeps seconds).
func TestBackupsHeldToTheMinimumInterval(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t)
	s3 := startS3(t)
	require.NoError(t, s3.client.MakeBucket(ctx, testBucket, minio.MakeBucketOptions{}))
	require.NoError(t, k8s.Create(ctx, s3.backupSecret(ns, testBucket)))
	startEtcdOf(t, "often", ns, 1, 1).publish()
	opts := testOptions(10 * time.Second)
	opts.MinInterval = 3 * time.Second
	startBackups(t, ns, opts)
	key := client.ObjectKeyFromObject(backedUpControlPlane(t, ns, "often", "often", v1alpha1.EtcdBackup{
		Schedule: "@every 1s", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"},
	}))
	var starts []time.Time
	eventually(t, time.Minute, "four snapshots", func() error {
		hcp := &v1alpha1.HostedControlPlane{}
		require.NoError(t, k8s.Get(ctx, key, hcp))
		if k := hcp.Status.Etcd.LastBackupKey; k != "" {
			if at := snapshotStart(t, k); len(starts) == 0 || !at.Equal(starts[len(starts)-1]) {
				starts = append(starts, at)
			}
		}
		if len(starts) < 4 {
			return fmt.Errorf("snapshots started at %v", starts)
		}
		return nil
	})
	for i := 1; i < len(starts); i++ {
		require.GreaterOrEqual(t, starts[i].Sub(starts[i-1].Truncate(time.Second)), opts.MinInterval, "snapshots started at %v", starts)
	}
}
