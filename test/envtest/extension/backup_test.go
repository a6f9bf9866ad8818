package extension

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/backup"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd/snapshotcheck"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/controller"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/settings"
)

// testBucket is the bucket the backup tests store snapshots in.
const testBucket = "backups"

// testOptions retry failures every second, give up on a final snapshot
// after finalTimeout, upload in parts of the smallest size S3 allows, so
// that a few MiB make several parts, and take snapshots as often as asked.
func testOptions(finalTimeout time.Duration) backup.Options {
	opts := backup.DefaultOptions()
	opts.RetryInterval, opts.FinalSnapshotTimeout, opts.SnapshotTimeout = time.Second, finalTimeout, 2*time.Minute
	opts.MinInterval = 0
	opts.PartSize = 5 << 20
	return opts
}

// startBackups runs the controller's backup controller (internal/backup,
// as cmd/controller runs it) in this process with opts. It sees only
// namespace ns, so that it leaves no finalizer on other tests' control
// planes once it stops.
func startBackups(t testing.TB, ns string, opts backup.Options) {
	t.Helper()
	startBackupsIn(t, opts, io.Discard, ns)
}

// startBackupsIn runs the backup controller as startBackups does, seeing
// namespaces, and writes its log to logs.
func startBackupsIn(t testing.TB, opts backup.Options, logs io.Writer, namespaces ...string) {
	t.Helper()
	startManager(t, opts, logs, false, namespaces)
}

// startControllers runs, as cmd/controller does, the control plane
// reconciler beside the backup controller, seeing namespaces: the control
// plane reconciler drives restores, through package backup's Restorer. No
// cert-manager runs here, and the tests' Clusters have no network, so the
// reconciler renders nothing: its restores are what is tested.
func startControllers(t testing.TB, opts backup.Options, logs io.Writer, namespaces ...string) {
	t.Helper()
	startManager(t, opts, logs, true, namespaces)
}

func startManager(t testing.TB, opts backup.Options, logs io.Writer, controlPlanes bool, namespaces []string) {
	t.Helper()
	seen := map[string]cache.Config{}
	for _, ns := range namespaces {
		seen[ns] = cache.Config{}
	}
	cacheOpts := cache.Options{DefaultNamespaces: seen}
	if controlPlanes {
		cacheOpts = controller.CacheOptions(controller.Shard{})
		cacheOpts.DefaultNamespaces = seen
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme(), Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:      cacheOpts,
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:     zap.New(zap.WriteTo(logs), zap.UseDevMode(true)),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	checker := etcd.NewChecker()
	if controlPlanes {
		clusters, err := controller.SetupClusterCache(ctx, mgr, mgr.GetClient(), controller.Shard{}, 1, settings.DefaultWorkloadHealthProbeInterval)
		require.NoError(t, err)
		r := controller.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), render.DefaultSettings(), nil,
			mgr.GetEventRecorder("hosted-control-plane-controller"), controller.ReadyzProber{Timeout: time.Second}, clusters)
		require.NoError(t, r.SetupWithManager(mgr))
		checker = r.EtcdClients()
	}
	t.Cleanup(checker.Close)
	require.NoError(t, backup.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), checker,
		mgr.GetEventRecorder("hosted-control-plane-controller"), opts).SetupWithManager(mgr))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
}

// backedUpControlPlane creates a Cluster and its HostedControlPlane with
// spec.etcd.backup as a user writes it, owned as Cluster API owns it.
func backedUpControlPlane(t testing.TB, ns, cluster, name string, b v1alpha1.EtcdBackup, changes ...func(*v1alpha1.HostedControlPlane)) *v1alpha1.HostedControlPlane {
	t.Helper()
	ctx := testContext(t)
	c := &clusterv1.Cluster{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: cluster}, c); apierrors.IsNotFound(err) {
		c = &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster}}
		c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "HostedControlPlane", Name: name}
		// With a network the control plane reconciler (startControllers)
		// goes on to wait for certificates, which no cert-manager here
		// issues, rather than retrying a bad situation with backoff.
		c.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
		require.NoError(t, k8s.Create(ctx, c))
	}
	hcp := &v1alpha1.HostedControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster, UID: c.UID,
		}}},
		Spec: v1alpha1.HostedControlPlaneSpec{Version: "v1.35.2"},
	}
	hcp.Spec.Etcd.Backup = &b
	for _, change := range changes {
		change(hcp)
	}
	require.NoError(t, k8s.Create(ctx, hcp))
	return hcp
}

// TestEtcdBackups takes snapshots of a real etcd cluster into a real S3
// server (versitygw) the way a platform engineer configures them, and checks
// what they would: the objects in the bucket, what they hold, the status,
// conditions, events and metrics, through schedule, retention, an on-demand
// snapshot, refused credentials, a missing bucket, a server killed in the
// middle of an upload, and deletion.
func TestEtcdBackups(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t)
	const cluster, bucket = "tenant", testBucket
	folder := "hcp/" + ns + "/" + cluster + "/"
	db := startEtcd(t, cluster, ns)
	db.publish()
	s3 := startS3(t)
	require.NoError(t, s3.client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}))
	require.NoError(t, k8s.Create(ctx, s3.backupSecret(ns, bucket+"/hcp")))
	// What retention must not touch: another cluster's snapshot whose name
	// starts the same, and an object of the user's in the cluster's folder.
	for _, key := range []string{"hcp/" + ns + "/" + cluster + "-old/20250101T000000.000Z-rev1.db", folder + "notes.txt"} {
		_, err := s3.client.PutObject(ctx, bucket, key, strings.NewReader("keep"), 4, minio.PutObjectOptions{})
		require.NoError(t, err)
	}
	writeConfigMaps(t, db, 2000)
	startBackups(t, ns, testOptions(10*time.Second))

	hcp := backedUpControlPlane(t, ns, cluster, cluster, v1alpha1.EtcdBackup{
		Schedule: "@every 2s", RetentionCount: ptr.To[int32](2), Secret: v1alpha1.EtcdBackupSecret{Name: "s3"},
	})
	key := client.ObjectKeyFromObject(hcp)

	// Scheduled: three snapshots in a row; retention keeps the newest two.
	var seen []string
	eventually(t, time.Minute, "three scheduled snapshots", func() error {
		require.NoError(t, k8s.Get(ctx, key, hcp))
		if k := hcp.Status.Etcd.LastBackupKey; k != "" && !slices.Contains(seen, k) {
			seen = append(seen, k)
		}
		if len(seen) < 3 {
			return fmt.Errorf("snapshots seen: %v; BackupReady: %v", seen, conditions.Get(hcp, v1alpha1.BackupReadyCondition))
		}
		return nil
	})
	// Once a year: nothing is scheduled while the rest runs.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		require.NoError(t, k8s.Get(ctx, key, hcp))
		hcp.Spec.Etcd.Backup.Schedule = "0 0 1 1 *"
		return k8s.Update(ctx, hcp)
	}))
	require.True(t, strings.HasPrefix(seen[0], folder) && strings.HasSuffix(seen[0], ".db"), seen[0])
	eventually(t, 30*time.Second, "retention", func() error {
		if got := snapshotKeys(ctx, s3, folder); len(got) != 2 || slices.Contains(got, seen[0]) {
			return fmt.Errorf("snapshots in the bucket: %v; the first taken was %s", got, seen[0])
		}
		return nil
	})
	require.Len(t, s3.snapshotObjects(ctx, bucket, "hcp/"+ns+"/"+cluster+"-old/"), 1, "another cluster's snapshots are not its to delete")
	require.Len(t, s3.snapshotObjects(ctx, bucket, folder+"notes.txt"), 1, "objects that are not snapshots stay")
	require.NoError(t, k8s.Get(ctx, key, hcp))
	st := hcp.Status.Etcd
	require.True(t, st.NextBackupTime.After(st.LastBackupTime.Time), "the next snapshot is due after the last: %v, %v", st.NextBackupTime, st.LastBackupTime)
	ready := conditions.Get(hcp, v1alpha1.BackupReadyCondition)
	require.Equal(t, metav1.ConditionTrue, ready.Status, ready.Message)
	holds2000ConfigMaps(t, s3.download(ctx, bucket, st.LastBackupKey), st.LastBackupSize.Value())
	require.Equal(t, st.LastBackupSize.Value(), metric(t, "hostedcp_etcd_backup_size_bytes", ns, cluster), "the size metric is the status's")
	require.Less(t, metric(t, "hostedcp_etcd_backup_newest_age_seconds", ns, cluster), int64(60))

	// On demand.
	last := st.LastBackupKey
	askForSnapshot(t, key)
	waitBackedUp(t, key, last, "an on-demand snapshot")

	// Credentials refused, then fixed.
	secret := s3.backupSecret(ns, bucket+"/hcp")
	secret.Data["secretAccessKey"] = []byte("wrong")
	require.NoError(t, k8s.Update(ctx, secret))
	last = waitFailing(t, key, v1alpha1.CredentialsRefusedReason, "refused the credentials")
	require.NoError(t, k8s.Update(ctx, s3.backupSecret(ns, bucket+"/hcp")))
	waitBackedUp(t, key, last, "the snapshot asked for, once the credentials are right")
	require.GreaterOrEqual(t, metricWith(t, "hostedcp_etcd_backup_failures_total", ns, cluster, v1alpha1.CredentialsRefusedReason), int64(1))

	// The bucket disappears, then comes back.
	s3.emptyAndRemoveBucket(ctx, bucket)
	last = waitFailing(t, key, v1alpha1.BucketNotFoundReason, `the bucket that key "bucket" of backup Secret `+ns+`/s3 names does not exist`)
	require.NoError(t, s3.client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}))
	waitBackedUp(t, key, last, "the snapshot asked for, once the bucket is back")

	// The server dies in the middle of an upload: nothing counts as stored.
	writeLargeValues(t, db, 24)
	s3.relay.arm(12<<20, s3.kill)
	last = waitFailing(t, key, v1alpha1.EndpointUnreachableReason, "is unreachable")
	s3.start()
	waitBackedUp(t, key, last, "the snapshot asked for, once the server is back")
	require.NoError(t, k8s.Get(ctx, key, hcp))
	require.Greater(t, hcp.Status.Etcd.LastBackupSize.Value(), int64(24<<20))
	for _, k := range snapshotKeys(ctx, s3, folder) {
		data := s3.download(ctx, bucket, k)
		_, err := io.Copy(io.Discard, snapshotcheck.Reader(bytes.NewReader(data)))
		require.NoError(t, err, "every snapshot in the bucket is whole: %s", k)
	}

	// Deleted: one final snapshot, then the control plane goes.
	before := snapshotKeys(ctx, s3, folder)
	require.NoError(t, k8s.Delete(ctx, hcp))
	eventually(t, time.Minute, "the control plane to go after its final snapshot", func() error {
		if err := k8s.Get(ctx, key, &v1alpha1.HostedControlPlane{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %w", err)
		}
		return nil
	})
	after := snapshotKeys(ctx, s3, folder)
	require.NotEqual(t, before[len(before)-1], after[len(after)-1], "a final snapshot was stored")
}

// TestFinalSnapshotNeverBlocksDeletion deletes a control plane whose store
// cannot be reached: deletion waits for the final snapshot only as long as
// it is told to, then goes on, and says so.
func TestFinalSnapshotNeverBlocksDeletion(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t)
	closed := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"},
		Data: map[string][]byte{
			"host": []byte("127.0.0.1:1"), "bucket": []byte("b"), "accessKeyID": []byte("a"), "secretAccessKey": []byte("s"),
		},
	}
	require.NoError(t, k8s.Create(ctx, closed))
	startBackups(t, ns, testOptions(5*time.Second))
	unreachable := v1alpha1.EtcdBackup{Schedule: "0 0 1 1 *", Secret: v1alpha1.EtcdBackupSecret{Name: "gone"}}
	lost := backedUpControlPlane(t, ns, "lost", "lost", unreachable)
	orphan := backedUpControlPlane(t, ns, "orphan", "orphan", unreachable)
	for _, hcp := range []*v1alpha1.HostedControlPlane{lost, orphan} {
		eventually(t, 30*time.Second, "the backup finalizer", func() error {
			require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(hcp), hcp))
			if !slices.Contains(hcp.Finalizers, backup.Finalizer) {
				return fmt.Errorf("finalizers of %s: %v", hcp.Name, hcp.Finalizers)
			}
			// Before its first snapshot a control plane shows nothing failing.
			if c := conditions.Get(hcp, v1alpha1.BackupReadyCondition); c == nil || c.Status != metav1.ConditionUnknown ||
				c.Reason != v1alpha1.BackupPendingReason || !strings.HasPrefix(c.Message, "no snapshot yet: the first is due at "+strconv.Itoa(time.Now().Year()+1)+"-01-01T00:") {
				return fmt.Errorf("BackupReady of %s: %+v", hcp.Name, c)
			}
			return nil
		})
	}
	// The orphan's Cluster goes first: there is no etcd left to find.
	require.NoError(t, k8s.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan"}}))
	for _, hcp := range []*v1alpha1.HostedControlPlane{lost, orphan} {
		require.NoError(t, k8s.Delete(ctx, hcp))
	}
	for _, hcp := range []*v1alpha1.HostedControlPlane{lost, orphan} {
		eventually(t, 30*time.Second, "deletion without a final snapshot", func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(hcp), &v1alpha1.HostedControlPlane{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s still there: %w", hcp.Name, err)
			}
			return nil
		})
	}
	requireEvent(t, ns, "lost", v1alpha1.FinalSnapshotSkippedReason, "no final snapshot: none was stored within 5s of the deletion; deletion goes on without it; the last failure: etcd: ")
	requireEvent(t, ns, "orphan", v1alpha1.FinalSnapshotSkippedReason, "no final snapshot: the control plane has no Cluster")
}

// writeConfigMaps stores n ConfigMaps the way the API server does, each
// with known content.
func writeConfigMaps(t *testing.T, db *etcdCluster, n int) {
	t.Helper()
	cli := db.client(0)
	for i := range n {
		_, err := cli.Put(testContext(t), fmt.Sprintf("/registry/configmaps/default/cm-%04d", i), fmt.Sprintf("content-%04d", i))
		require.NoError(t, err)
	}
}

// writeLargeValues grows the database by about n MiB.
func writeLargeValues(t testing.TB, db *etcdCluster, n int) {
	t.Helper()
	cli := db.client(0)
	value := strings.Repeat("x", 1<<20)
	for i := range n {
		_, err := cli.Put(testContext(t), fmt.Sprintf("/registry/secrets/default/big-%02d", i), value)
		require.NoError(t, err)
	}
}

// holds2000ConfigMaps opens a snapshot as etcd would restore it: its
// trailing sha256 matches, and its database holds every ConfigMap written.
func holds2000ConfigMaps(t *testing.T, snapshot []byte, size int64) {
	t.Helper()
	require.Equal(t, size, int64(len(snapshot)), "the status tells the size stored")
	_, err := io.Copy(io.Discard, snapshotcheck.Reader(bytes.NewReader(snapshot)))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "db")
	require.NoError(t, os.WriteFile(path, snapshot[:len(snapshot)-32], 0o600))
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer func() { _ = bdb.Close() }()
	found := map[string]string{}
	require.NoError(t, bdb.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("key")).ForEach(func(_, v []byte) error {
			var kv mvccpb.KeyValue
			if err := kv.Unmarshal(v); err != nil {
				return err
			}
			if name, ok := strings.CutPrefix(string(kv.Key), "/registry/configmaps/default/"); ok {
				found[name] = string(kv.Value)
			}
			return nil
		})
	}))
	require.Len(t, found, 2000)
	for _, i := range []int{0, 999, 1999} {
		require.Equal(t, fmt.Sprintf("content-%04d", i), found[fmt.Sprintf("cm-%04d", i)])
	}
}

func (s *s3Server) download(ctx context.Context, bucket, key string) []byte {
	s.t.Helper()
	obj, err := s.client.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	require.NoError(s.t, err)
	defer func() { _ = obj.Close() }()
	data, err := io.ReadAll(obj)
	require.NoError(s.t, err)
	return data
}

// snapshotKeys are the snapshot objects in a cluster's folder, oldest first.
func snapshotKeys(ctx context.Context, s3 *s3Server, folder string) []string {
	var keys []string
	for _, obj := range s3.snapshotObjects(ctx, testBucket, folder) {
		if strings.HasSuffix(obj.Key, ".db") {
			keys = append(keys, obj.Key)
		}
	}
	slices.Sort(keys)
	return keys
}

// askForSnapshot sets the annotation a user sets with
// kubectl annotate hcp <name> controlplane.cluster.x-k8s.io/backup-now=<anything>.
func askForSnapshot(t testing.TB, key types.NamespacedName) {
	t.Helper()
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(testContext(t), key, hcp))
	before := hcp.DeepCopy()
	if hcp.Annotations == nil {
		hcp.Annotations = map[string]string{}
	}
	hcp.Annotations[v1alpha1.BackupNowAnnotation] = time.Now().String()
	require.NoError(t, k8s.Patch(testContext(t), hcp, client.MergeFrom(before)))
}

// waitBackedUp waits for a snapshot other than last, taken as asked: the
// annotation is gone and BackupReady is true.
func waitBackedUp(t testing.TB, key types.NamespacedName, last, what string) {
	t.Helper()
	eventually(t, time.Minute, what, func() error {
		hcp := &v1alpha1.HostedControlPlane{}
		require.NoError(t, k8s.Get(testContext(t), key, hcp))
		c := conditions.Get(hcp, v1alpha1.BackupReadyCondition)
		_, asked := hcp.Annotations[v1alpha1.BackupNowAnnotation]
		if hcp.Status.Etcd.LastBackupKey == last || asked || c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("last snapshot %s, still asked: %t, BackupReady: %+v", hcp.Status.Etcd.LastBackupKey, asked, c)
		}
		return nil
	})
}

// waitFailing asks for a snapshot and waits until BackupReady says why it
// failed, a Warning event tells of it, and no snapshot was counted; it
// returns the last snapshot's key.
func waitFailing(t *testing.T, key types.NamespacedName, reason, says string) string {
	t.Helper()
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(testContext(t), key, hcp))
	last := hcp.Status.Etcd.LastBackupKey
	askForSnapshot(t, key)
	eventually(t, time.Minute, "BackupReady "+reason, func() error {
		require.NoError(t, k8s.Get(testContext(t), key, hcp))
		if c := conditions.Get(hcp, v1alpha1.BackupReadyCondition); c == nil || c.Reason != reason || !strings.Contains(c.Message, says) {
			return fmt.Errorf("BackupReady: %+v", c)
		}
		return nil
	})
	require.Equal(t, last, hcp.Status.Etcd.LastBackupKey, "a failed snapshot is not counted")
	requireEvent(t, key.Namespace, key.Name, reason, says)
	return last
}

func requireEvent(t *testing.T, ns, name, reason, says string) {
	t.Helper()
	eventually(t, 30*time.Second, "a "+reason+" event", func() error {
		events := &eventsv1.EventList{}
		require.NoError(t, k8s.List(testContext(t), events, client.InNamespace(ns)))
		for _, e := range events.Items {
			if e.Regarding.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, says) {
				return nil
			}
		}
		return fmt.Errorf("no Warning event %s saying %q among %d", reason, says, len(events.Items))
	})
}

// metric is the value of a backup metric of a control plane, as the
// controller's metrics endpoint would serve it.
func metric(t *testing.T, name, ns, cp string) int64 { return metricWith(t, name, ns, cp, "") }

func metricWith(t *testing.T, name, ns, cp, reason string) int64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == ns && labels["name"] == cp && (reason == "" || labels["reason"] == reason) {
				switch {
				case m.GetGauge() != nil:
					return int64(m.GetGauge().GetValue())
				case m.GetCounter() != nil:
					return int64(m.GetCounter().GetValue())
				}
			}
		}
	}
	t.Fatalf("no metric %s for %s/%s", name, ns, cp)
	return 0
}
