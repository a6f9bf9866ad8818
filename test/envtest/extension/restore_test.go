package extension

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/backup"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
)

// TestEtcdRestore is a disaster recovery as a platform engineer would go
// through it: a control plane's etcd holds 2,000 ConfigMaps, its snapshots
// are in a real S3 server (versitygw), it is deleted, etcd is lost, and a
// control plane of the same name is created with restore: latest. The
// controller chooses the newest snapshot and gives the members a presigned
// URL of it, renewed while they have not restored, for the same snapshot
// whatever is stored meanwhile; three members restore it as their init
// containers do (cmd/etcd-restore) and real etcd processes start on what
// they restored: every key is there with its value, revisions moved beyond
// the snapshot's, and the three members vote. Once etcd answers, the status
// says what was restored.
func TestEtcdRestore(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t)
	const cluster = "tenant"
	folder := "hcp/" + ns + "/" + cluster + "/"
	db := startEtcd(t, cluster, ns)
	db.publish()
	s3 := startS3(t)
	require.NoError(t, s3.client.MakeBucket(ctx, testBucket, minio.MakeBucketOptions{}))
	require.NoError(t, k8s.Create(ctx, s3.backupSecret(ns, testBucket+"/hcp")))
	writeConfigMaps(t, db, 2000)
	written, err := db.client(0).Get(ctx, "/registry/configmaps/default/cm-1999")
	require.NoError(t, err)
	startControllers(t, testOptions(30*time.Second), io.Discard, ns)
	store := v1alpha1.EtcdBackup{Schedule: "0 0 1 1 *", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}

	// Two snapshots, and the final one of the deletion: latest is the
	// newest.
	hcp := backedUpControlPlane(t, ns, cluster, cluster, store)
	last := ""
	for range 2 {
		askForSnapshot(t, client.ObjectKeyFromObject(hcp))
		waitBackedUp(t, client.ObjectKeyFromObject(hcp), last, "an on-demand snapshot")
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(hcp), hcp))
		last = hcp.Status.Etcd.LastBackupKey
	}
	require.NoError(t, k8s.Delete(ctx, hcp))
	eventually(t, time.Minute, "the control plane to go", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(hcp), &v1alpha1.HostedControlPlane{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %w", err)
		}
		return nil
	})
	keys := snapshotKeys(ctx, s3, folder)
	require.GreaterOrEqual(t, len(keys), 2)
	newest := keys[len(keys)-1]
	for i := range db.members {
		db.stop(i) // etcd is lost
	}

	restored := restoringControlPlane(t, ns, cluster, store, v1alpha1.EtcdRestore{Snapshot: v1alpha1.LatestSnapshot})
	secret := waitRestorePending(t, restored, newest)
	assert.Equal(t, s3.ca, secret.Data[contract.EtcdRestoreCAKey], "the store's CA comes with the URL")

	// While the restore is pending, a URL about to expire is renewed, for
	// the same snapshot: a newer one stored meanwhile changes nothing, so
	// every member restores the same object.
	_, err = s3.client.PutObject(ctx, testBucket, folder+"29991231T000000.000Z-rev1.db", strings.NewReader("newer"), 5, minio.PutObjectOptions{})
	require.NoError(t, err)
	// A URL renewed within the second it was first signed in reads the
	// same, so the renewal shows in the signing time and the expiry.
	const expiresAnnotation = "controlplane.cluster.x-k8s.io/restore-url-expires"
	before := secret.DeepCopy()
	expiring := time.Now().UTC().Truncate(time.Second)
	secret.Annotations[expiresAnnotation] = expiring.Format(time.RFC3339)
	require.NoError(t, k8s.Patch(ctx, secret, client.MergeFrom(before)))
	eventually(t, time.Minute, "a renewed URL", func() error {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret))
		expires, err := time.Parse(time.RFC3339, secret.Annotations[expiresAnnotation])
		require.NoError(t, err)
		if expires.Before(expiring.Add(backup.RestoreURLExpiry)) {
			return fmt.Errorf("the URL expiring at %s is not renewed", expires)
		}
		return nil
	})
	u, err := url.Parse(string(secret.Data[contract.EtcdRestoreURLKey]))
	require.NoError(t, err)
	signed, err := time.Parse("20060102T150405Z", u.Query().Get("X-Amz-Date"))
	require.NoError(t, err, "the URL's signing time")
	assert.False(t, signed.Before(expiring), "the URL was signed again (at %s) once it was about to expire (%s)", signed, expiring)
	assert.Equal(t, fmt.Sprint(int(backup.RestoreURLExpiry.Seconds())), u.Query().Get("X-Amz-Expires"), "the URL stays valid as long as a new one")
	assert.Equal(t, newest, string(secret.Data[contract.EtcdRestoreKeyKey]))
	require.NoError(t, s3.client.RemoveObject(ctx, testBucket, folder+"29991231T000000.000Z-rev1.db", minio.RemoveObjectOptions{}))

	// Three new members restore it with the init container's command, as
	// their pods run it, and etcd starts on what they restored.
	bin, err := envtest.Build(env.Root, "./cmd/etcd-restore", binDir)
	require.NoError(t, err)
	fresh := newEtcdCluster(t, cluster, ns, etcdMembers, etcdMembers)
	run := func(i int, state string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, "--data-dir="+fresh.dataDir(i), "--name="+fresh.memberName(i),
			"--initial-advertise-peer-urls="+fresh.peerURL(i), "--initial-cluster-token="+cluster)
		cmd.Env = []string{"ETCD_INITIAL_CLUSTER=" + fresh.initialCluster(), "ETCD_INITIAL_CLUSTER_STATE=" + state}
		for _, key := range []string{contract.EtcdRestoreKeyKey, contract.EtcdRestoreURLKey, contract.EtcdRestoreCAKey} {
			cmd.Env = append(cmd.Env, key+"="+string(secret.Data[key]))
		}
		out, err := cmd.CombinedOutput()
		t.Logf("etcd-restore of %s: %s", fresh.memberName(i), out)
		return string(out), err
	}
	initContainer := func(i int, state string) string {
		out, err := run(i, state)
		require.NoError(t, err, "%s", out)
		return out
	}
	// The store stops in the middle of the download: the member fails
	// (its pod's init container is restarted), leaving nothing etcd would
	// take for data, and restores once the store is back.
	s3.relay.arm(64<<10, s3.kill)
	out, err := run(0, "new")
	require.Error(t, err)
	assert.Contains(t, out, `"msg":"restore failed"`)
	volume := filepath.Dir(fresh.dataDir(0))
	for _, left := range []string{fresh.dataDir(0), filepath.Join(volume, "restore-snapshot.db"), filepath.Join(volume, "restore-data.tmp")} {
		_, err := os.Stat(left)
		assert.ErrorIs(t, err, os.ErrNotExist, "no data directory, download or work directory is left")
	}
	s3.start()
	for i := range etcdMembers {
		out := initContainer(i, "new")
		assert.Regexp(t, fmt.Sprintf(`"msg":"restored %s \(\d+ bytes, revision \d+, bumped by 1000000000\) as member %s"`, newest, fresh.memberName(i)), out)
	}
	// A member that starts again finds its data and leaves it; one that
	// joins restores nothing.
	assert.Contains(t, initContainer(0, "new"), "nothing to restore: member member-0: data directory "+fresh.dataDir(0)+" already holds data")
	assert.Contains(t, initContainer(etcdMembers-1, "existing"), `nothing to restore: member member-2 joins an existing cluster (initial cluster state \"existing\") and syncs from its peers`)
	for i := range etcdMembers {
		fresh.start(i)
	}
	fresh.waitHealthy()
	cli := fresh.client(0)
	all, err := cli.Get(ctx, "/registry/configmaps/default/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, all.Kvs, 2000)
	for i, kv := range all.Kvs {
		require.Equal(t, fmt.Sprintf("/registry/configmaps/default/cm-%04d", i), string(kv.Key))
		require.Equal(t, fmt.Sprintf("content-%04d", i), string(kv.Value))
	}
	// Objects keep their revisions (their resourceVersions); the cluster's
	// moves beyond the snapshot's by the bump, and what lies between reads
	// as compacted, so a watcher resuming from before relists instead of
	// seeing time go backwards.
	assert.Equal(t, written.Kvs[0].ModRevision, all.Kvs[1999].ModRevision)
	assert.Greater(t, all.Header.Revision, written.Header.Revision+contract.EtcdRevisionBump-1, "revisions never go backwards")
	_, err = cli.Get(ctx, "/registry/configmaps/default/cm-1999", clientv3.WithRev(written.Header.Revision))
	require.ErrorIs(t, err, rpctypes.ErrCompacted)
	members, err := cli.MemberList(ctx)
	require.NoError(t, err)
	require.Len(t, members.Members, etcdMembers)
	for _, m := range members.Members {
		assert.False(t, m.IsLearner, "%s votes", m.Name)
	}

	// Once etcd answers (the controller records its members as existing),
	// the status says what it was restored from.
	answered(t, restored, cluster)
	eventually(t, time.Minute, "status.etcd.restoredFrom", func() error {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(restored), restored))
		c := conditions.Get(restored, v1alpha1.EtcdRestoredCondition)
		if restored.Status.Etcd.RestoredFrom == nil || c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("restoredFrom %+v, EtcdRestored %+v", restored.Status.Etcd.RestoredFrom, c)
		}
		return nil
	})
	revision := newest[strings.LastIndex(newest, "-rev")+4 : len(newest)-3]
	assert.Equal(t, newest, restored.Status.Etcd.RestoredFrom.Key)
	assert.Equal(t, revision, fmt.Sprint(restored.Status.Etcd.RestoredFrom.Revision))
	assert.Equal(t, fmt.Sprintf("etcd was restored from %s (revision %s, bumped by 1000000000)", newest, revision),
		conditions.Get(restored, v1alpha1.EtcdRestoredCondition).Message)
}

// TestEtcdRestoreSaysWhatIsMissing: a snapshot, a folder or a bucket that
// does not exist keeps etcd from starting (no restore Secret, so no member
// starts empty), and EtcdRestored and an event say exactly what is missing.
func TestEtcdRestoreSaysWhatIsMissing(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t)
	s3 := startS3(t)
	require.NoError(t, s3.client.MakeBucket(ctx, testBucket, minio.MakeBucketOptions{}))
	require.NoError(t, k8s.Create(ctx, s3.backupSecret(ns, testBucket)))
	missing := s3.backupSecret(ns, "nobucket")
	missing.Name = "nobucket"
	require.NoError(t, k8s.Create(ctx, missing))
	startControllers(t, testOptions(10*time.Second), io.Discard, ns)
	backup := func(secret string) v1alpha1.EtcdBackup {
		return v1alpha1.EtcdBackup{Schedule: "0 0 1 1 *", Secret: v1alpha1.EtcdBackupSecret{Name: secret}}
	}
	for _, tc := range []struct {
		cluster, secret string
		restore         v1alpha1.EtcdRestore
		reason, says    string
	}{
		{
			"named", "s3",
			v1alpha1.EtcdRestore{Snapshot: ns + "/gone/20260102T030405.000Z-rev42.db"},
			v1alpha1.SnapshotNotFoundReason,
			fmt.Sprintf(`etcd does not start until its snapshot is found: snapshot %s/gone/20260102T030405.000Z-rev42.db does not exist in the store of backup Secret %s/s3`, ns, ns),
		},
		{
			"empty", "s3",
			v1alpha1.EtcdRestore{Snapshot: v1alpha1.LatestSnapshot, FromCluster: ns + "/never-backed-up"},
			v1alpha1.SnapshotNotFoundReason,
			fmt.Sprintf(`etcd does not start until its snapshot is found: no snapshot of Cluster %s/never-backed-up in the store of backup Secret %s/s3`, ns, ns),
		},
		{
			"nobucket", "nobucket",
			v1alpha1.EtcdRestore{Snapshot: v1alpha1.LatestSnapshot},
			v1alpha1.BucketNotFoundReason,
			fmt.Sprintf(`etcd does not start until its snapshot is found: the bucket that key "bucket" of backup Secret %s/nobucket names does not exist at its endpoint`, ns),
		},
		{
			"nobucket-key", "nobucket",
			v1alpha1.EtcdRestore{Snapshot: ns + "/gone/20260102T030405.000Z-rev42.db"},
			v1alpha1.BucketNotFoundReason,
			fmt.Sprintf(`etcd does not start until its snapshot is found: the bucket that key "bucket" of backup Secret %s/nobucket names does not exist at its endpoint`, ns),
		},
	} {
		t.Run(tc.cluster, func(t *testing.T) {
			hcp := restoringControlPlane(t, ns, tc.cluster, backup(tc.secret), tc.restore)
			eventually(t, time.Minute, "EtcdRestored "+tc.reason, func() error {
				require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(hcp), hcp))
				c := conditions.Get(hcp, v1alpha1.EtcdRestoredCondition)
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != tc.reason {
					return fmt.Errorf("EtcdRestored: %+v", c)
				}
				return nil
			})
			assert.Equal(t, tc.says, conditions.Get(hcp, v1alpha1.EtcdRestoredCondition).Message)
			requireEvent(t, ns, hcp.Name, tc.reason, tc.says)
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: contract.EtcdRestoreSecretName(tc.cluster)}, &corev1.Secret{})
			assert.True(t, apierrors.IsNotFound(err), "no restore Secret, so no member starts: %v", err)
			assert.Nil(t, hcp.Status.Etcd.RestoredFrom)
		})
	}
}

// restoringControlPlane creates a Cluster and its HostedControlPlane with
// spec.etcd.restore, as a user re-creating a lost cluster writes it.
func restoringControlPlane(t testing.TB, ns, cluster string, b v1alpha1.EtcdBackup, r v1alpha1.EtcdRestore) *v1alpha1.HostedControlPlane {
	t.Helper()
	hcp := backedUpControlPlane(t, ns, cluster, cluster, b, func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Restore = &r })
	return hcp
}

// waitRestorePending waits until EtcdRestored says the members restore key,
// and returns the restore Secret that gives them its URL.
func waitRestorePending(t *testing.T, hcp *v1alpha1.HostedControlPlane, key string) *corev1.Secret {
	t.Helper()
	ctx := testContext(t)
	eventually(t, time.Minute, "EtcdRestored RestorePending", func() error {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(hcp), hcp))
		if c := conditions.Get(hcp, v1alpha1.EtcdRestoredCondition); c == nil || c.Reason != v1alpha1.RestorePendingReason {
			return fmt.Errorf("EtcdRestored: %+v", c)
		}
		return nil
	})
	assert.Equal(t, "every etcd member restores "+key+" before it first starts", conditions.Get(hcp, v1alpha1.EtcdRestoredCondition).Message)
	secret := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: hcp.Namespace, Name: contract.EtcdRestoreSecretName(hcp.Name)}, secret))
	require.Equal(t, key, string(secret.Data[contract.EtcdRestoreKeyKey]))
	return secret
}

// answered records the members of etcd as existing, as the control plane
// reconciler does once etcd answers.
func answered(t *testing.T, hcp *v1alpha1.HostedControlPlane, cluster string) {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: hcp.Namespace, Name: etcd.MembersConfigMap(cluster), OwnerReferences: []metav1.OwnerReference{{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: "HostedControlPlane", Name: hcp.Name, UID: hcp.UID,
		}}},
		Data: map[string]string{"ETCD_INITIAL_CLUSTER": "", "ETCD_INITIAL_CLUSTER_STATE": "existing"},
	}
	require.NoError(t, k8s.Create(testContext(t), cm))
}

// TestRestoreInPlaceIsTakenOnce asks for a restore in place as the README
// shows: a snapshot that does not exist stops nothing, says so and keeps
// the request; one that does is recorded in status.etcd.restoring, with
// the restore Secret written for its ID, and only then is the request
// removed.
func TestRestoreInPlaceIsTakenOnce(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t)
	s3 := startS3(t)
	require.NoError(t, s3.client.MakeBucket(ctx, testBucket, minio.MakeBucketOptions{}))
	require.NoError(t, k8s.Create(ctx, s3.backupSecret(ns, testBucket)))
	startControllers(t, testOptions(5*time.Second), io.Discard, ns)
	hcp := backedUpControlPlane(t, ns, "prod", "prod", v1alpha1.EtcdBackup{Schedule: "0 0 1 1 *", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}})
	ask := func(value string) {
		t.Helper()
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(hcp), hcp))
		before := hcp.DeepCopy()
		hcp.Annotations = map[string]string{v1alpha1.RestoreEtcdAnnotation: value}
		require.NoError(t, k8s.Patch(ctx, hcp, client.MergeFrom(before)))
	}

	missing := ns + "/prod/20260102T030405.000Z-rev42.db"
	ask(missing)
	says := fmt.Sprintf(`etcd is not restored in place, and nothing was stopped: snapshot %s does not exist in the store of backup Secret %s/s3; `+
		`it is tried again until the annotation controlplane.cluster.x-k8s.io/restore-etcd is removed`, missing, ns)
	eventually(t, time.Minute, "EtcdRestored SnapshotNotFound", func() error {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(hcp), hcp))
		if c := conditions.Get(hcp, v1alpha1.EtcdRestoredCondition); c == nil || c.Reason != v1alpha1.SnapshotNotFoundReason {
			return fmt.Errorf("EtcdRestored: %+v", c)
		}
		return nil
	})
	assert.Equal(t, says, conditions.Get(hcp, v1alpha1.EtcdRestoredCondition).Message)
	requireEvent(t, ns, hcp.Name, v1alpha1.SnapshotNotFoundReason, says)
	assert.Nil(t, hcp.Status.Etcd.Restoring, "nothing stops")
	assert.Contains(t, hcp.Annotations, v1alpha1.RestoreEtcdAnnotation, "the request stays until it can be taken")

	key := ns + "/prod/20261123T030000.000Z-rev81234.db"
	_, err := s3.client.PutObject(ctx, testBucket, key, strings.NewReader("a snapshot"), 10, minio.PutObjectOptions{})
	require.NoError(t, err)
	ask(v1alpha1.LatestSnapshot)
	eventually(t, time.Minute, "status.etcd.restoring", func() error {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(hcp), hcp))
		if hcp.Status.Etcd.Restoring == nil || hcp.Annotations[v1alpha1.RestoreEtcdAnnotation] != "" {
			return fmt.Errorf("restoring %+v, annotations %v", hcp.Status.Etcd.Restoring, hcp.Annotations)
		}
		return nil
	})
	restoring := hcp.Status.Etcd.Restoring
	assert.Equal(t, key, restoring.Key, "latest is the newest snapshot of the control plane's own folder")
	assert.Regexp(t, `^\d{8}T\d{6}Z$`, restoring.ID)
	c := conditions.Get(hcp, v1alpha1.EtcdRestoredCondition)
	assert.Equal(t, v1alpha1.StoppingForRestoreReason, c.Reason)
	assert.Equal(t, fmt.Sprintf("etcd is restored in place from %s (restore %s): the API servers, controller-manager and scheduler stop first, then every etcd member", key, restoring.ID), c.Message)
	secret := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: contract.EtcdRestoreSecretName("prod")}, secret))
	assert.Equal(t, restoring.ID, string(secret.Data[contract.EtcdRestoreIDKey]))
	assert.Equal(t, key, string(secret.Data[contract.EtcdRestoreKeyKey]))
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(secret.Data[contract.EtcdRestoreCAKey]), "the store's CA is in the Secret")
	get, err := http.NewRequestWithContext(ctx, http.MethodGet, string(secret.Data[contract.EtcdRestoreURLKey]), nil)
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}).Do(get)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, err)
	assert.Equal(t, "a snapshot", string(body), "the presigned URL reads the snapshot without credentials")

	// The request is not taken again while the restore is under way.
	time.Sleep(2 * time.Second)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(hcp), hcp))
	assert.Equal(t, restoring, hcp.Status.Etcd.Restoring)
}
