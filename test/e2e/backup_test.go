package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd/snapshotcheck"
	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
	"github.com/hostedcp/cluster-api-provider-hosted/test/pkitest"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
)

// backupStore is versitygw (built by `make versitygw`, named by VERSITYGW)
// running on the host at cluster.ExternalAddress, where the controller's pod
// and etcd's restore init containers reach it as they would a store outside
// the management cluster, with a bucket and a backup Secret in a namespace
// of its own, which startBackupStore creates, as a platform team keeps it:
// control planes of other namespaces use it once grant allows them.
type backupStore struct {
	client          *minio.Client
	bucket          string
	secretNamespace string
	// dataDir is versitygw's posix backend: each object is a file at
	// <dataDir>/<bucket>/<key>.
	dataDir string
}

const backupConfigMaps = 2000

func startBackupStore(t testing.TB, secretNamespace string) *backupStore {
	t.Helper()
	bin := os.Getenv("VERSITYGW")
	require.NotEmpty(t, bin, "VERSITYGW is not set: run the tests with `make test-e2e`, which builds versitygw")
	dir := t.TempDir()
	ca, err := pkitest.NewCA("s3-ca")
	require.NoError(t, err)
	kp, err := ca.Issue("versitygw", nil, cluster.ExternalAddress)
	require.NoError(t, err)
	key, err := kp.KeyPEM()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), kp.CertPEM(), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600))
	for _, d := range []string{"data", "meta"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o700))
	}
	l, err := net.Listen("tcp", net.JoinHostPort(cluster.ExternalAddress, "0"))
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	access, secret := randomHex(t), randomHex(t)
	p, err := envtest.StartProcess(bin, nil, "--access", access, "--secret", secret, "--port", addr, "--region", "us-east-1",
		"--cert", filepath.Join(dir, "tls.crt"), "--key", filepath.Join(dir, "tls.key"), "--quiet",
		"posix", "--sidecar", filepath.Join(dir, "meta"), filepath.Join(dir, "data"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Kill() })
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	transport, err := minio.DefaultTransport(true)
	require.NoError(t, err)
	transport.TLSClientConfig.RootCAs = roots
	s := &backupStore{bucket: "backups", secretNamespace: namespace(t, secretNamespace), dataDir: filepath.Join(dir, "data")}
	s.client, err = minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(access, secret, ""), Secure: true, Transport: transport, Region: "us-east-1"})
	require.NoError(t, err)
	eventually(t, 30*time.Second, "versitygw makes the bucket", func() error {
		return s.client.MakeBucket(testContext(t), s.bucket, minio.MakeBucketOptions{})
	})
	require.NoError(t, k8s.Create(testContext(t), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.secretNamespace, Name: "s3"},
		Data: map[string][]byte{
			"host": []byte(addr), "region": []byte("us-east-1"), "bucket": []byte(s.bucket),
			"accessKeyID": []byte(access), "secretAccessKey": []byte(secret), "ca.crt": ca.CertPEM(),
		},
	}))
	return s
}

// grant lets the control planes of namespace ns use the store's backup
// Secret, as the owner of the Secret's namespace does with a ReferenceGrant.
func (s *backupStore) grant(t testing.TB, ns string) {
	t.Helper()
	require.NoError(t, k8s.Create(testContext(t), &gatewayv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.secretNamespace, Name: "backups-of-" + ns},
		Spec: gatewayv1beta1.ReferenceGrantSpec{
			From: []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1beta1.Group(v1alpha1.GroupVersion.Group), Kind: "HostedControlPlane", Namespace: gatewayv1beta1.Namespace(ns)}},
			To:   []gatewayv1beta1.ReferenceGrantTo{{Kind: "Secret", Name: ptr.To(gatewayv1beta1.ObjectName("s3"))}},
		},
	}))
}

func randomHex(t testing.TB) string {
	b := make([]byte, 12)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// snapshotLands writes backupConfigMaps ConfigMaps of known content through
// the Cluster's kubeconfig, turns on backups (a yearly schedule) and asks for
// a snapshot as the README shows, then reads the snapshot back from the
// bucket: whole (its sha256) and holding every ConfigMap. It returns the
// snapshot as the store keeps it on disk.
func snapshotLands(t *testing.T, s *backupStore, key client.ObjectKey) []byte {
	writeConfigMaps(t, key, backupConfigMaps)
	st := snapshotStored(t, s, key).Status.Etcd
	require.True(t, strings.HasPrefix(st.LastBackupKey, key.Namespace+"/"+key.Name+"/"), st.LastBackupKey)
	data := s.download(t, st.LastBackupKey)
	require.Equal(t, st.LastBackupSize.Value(), int64(len(data)))
	_, err := io.Copy(io.Discard, snapshotcheck.Reader(bytes.NewReader(data)))
	require.NoError(t, err, "the snapshot ends in the sha256 of its database")
	require.Equal(t, backupConfigMaps, configMapsIn(t, data, "/registry/configmaps/bk/cm-", "content-1999"))
	onDisk, err := os.ReadFile(filepath.Join(s.dataDir, s.bucket, filepath.FromSlash(st.LastBackupKey)))
	require.NoError(t, err, "versitygw keeps the object as a file")
	require.Equal(t, data, onDisk)
	return onDisk
}

// everyConfigMapRestored reads the n ConfigMaps writeConfigMaps wrote through
// the kubeconfig of the Cluster created again, and checks that each is back
// with its content, restored from the newest snapshot, its final one.
func everyConfigMapRestored(t testing.TB, s *backupStore, key client.ObjectKey, n int) {
	ctx := testContext(t)
	hcp := &v1alpha1.HostedControlPlane{}
	eventually(t, time.Minute, "status.etcd.restoredFrom", func() error {
		if err := k8s.Get(ctx, key, hcp); err != nil {
			return err
		}
		if hcp.Status.Etcd.RestoredFrom == nil {
			return fmt.Errorf("EtcdRestored: %+v", conditions.Get(hcp, v1alpha1.EtcdRestoredCondition))
		}
		return nil
	})
	keys := s.snapshotKeys(t, key)
	require.Equal(t, keys[len(keys)-1], hcp.Status.Etcd.RestoredFrom.Key)
	hosted, err := kubernetes.NewForConfig(hostedConfig(t, key.Namespace, key.Name))
	require.NoError(t, err)
	writtenConfigMapsAre(t, hosted, n)
}

// writtenConfigMapsAre checks that the namespace bk holds the n ConfigMaps
// writeConfigMaps wrote, each with its content, the namespace's root CA
// and nothing else; it returns the resourceVersion of the list.
func writtenConfigMapsAre(t testing.TB, hosted kubernetes.Interface, n int) string {
	list, err := hosted.CoreV1().ConfigMaps("bk").List(testContext(t), metav1.ListOptions{})
	require.NoError(t, err)
	found := map[string]string{}
	for _, cm := range list.Items {
		found[cm.Name] = cm.Data["content"]
	}
	for i := range n {
		name := fmt.Sprintf("cm-%04d", i)
		require.Equal(t, fmt.Sprintf("content-%04d", i), found[name], name)
	}
	require.Len(t, found, n+1, "the ConfigMaps and the namespace's root CA, and nothing else")
	return list.ResourceVersion
}

// snapshotKeys are the snapshots of the Cluster key, oldest first.
func (s *backupStore) snapshotKeys(t testing.TB, key client.ObjectKey) []string {
	var keys []string
	for obj := range s.client.ListObjects(testContext(t), s.bucket, minio.ListObjectsOptions{Prefix: key.Namespace + "/" + key.Name + "/"}) {
		require.NoError(t, obj.Err)
		keys = append(keys, obj.Key)
	}
	return keys
}

// writeConfigMaps writes n ConfigMaps of known content into the namespace
// bk through the Cluster's kubeconfig.
func writeConfigMaps(t testing.TB, key client.ObjectKey, n int) {
	cfg := hostedConfig(t, key.Namespace, key.Name)
	// client-go's default of 5 requests a second would make this minutes.
	cfg.QPS, cfg.Burst = 500, 500
	hosted, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx := testContext(t)
	_, err = hosted.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bk"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	start := time.Now()
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			_, err := hosted.CoreV1().ConfigMaps("bk").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)}, Data: map[string]string{"content": fmt.Sprintf("content-%04d", i)},
			}, metav1.CreateOptions{})
			return err
		})
	}
	require.NoError(t, g.Wait())
	t.Logf("%d ConfigMaps written in %s", n, time.Since(start).Round(time.Second))
}

// backUp turns on backups of the Cluster's control plane into the store, on
// a yearly schedule, and asks for a snapshot now if told to.
func backUp(t testing.TB, s *backupStore, key client.ObjectKey, now bool) *v1alpha1.HostedControlPlane {
	ctx := testContext(t)
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(ctx, key, hcp))
	before := hcp.DeepCopy()
	hcp.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "0 0 1 1 *", Secret: v1alpha1.EtcdBackupSecret{Name: "s3", Namespace: ptr.To(s.secretNamespace)}}
	if now {
		hcp.Annotations = map[string]string{v1alpha1.BackupNowAnnotation: "e2e"}
	}
	require.NoError(t, k8s.Patch(ctx, hcp, client.MergeFrom(before)))
	return hcp
}

// snapshotStored turns on backups of the Cluster's control plane into the
// store, asks for a snapshot now, and waits until it is stored.
func snapshotStored(t testing.TB, s *backupStore, key client.ObjectKey) *v1alpha1.HostedControlPlane {
	hcp := backUp(t, s, key, true)
	eventually(t, 2*time.Minute, "a snapshot is stored", func() error {
		if err := k8s.Get(testContext(t), key, hcp); err != nil {
			return err
		}
		if hcp.Status.Etcd.LastBackupKey == "" {
			return fmt.Errorf("no snapshot yet; BackupReady: %+v", conditions.Get(hcp, v1alpha1.BackupReadyCondition))
		}
		return nil
	})
	return hcp
}

// finalSnapshotStored checks that deleting the Cluster stored one more
// snapshot than last.
func finalSnapshotStored(t *testing.T, s *backupStore, key client.ObjectKey, last string) {
	keys := s.snapshotKeys(t, key)
	require.Len(t, keys, 2, "the snapshot asked for and the final one")
	require.Equal(t, last, keys[0])
}

func (s *backupStore) download(t *testing.T, key string) []byte {
	obj, err := s.client.GetObject(testContext(t), s.bucket, key, minio.GetObjectOptions{})
	require.NoError(t, err)
	defer func() { _ = obj.Close() }()
	data, err := io.ReadAll(obj)
	require.NoError(t, err)
	return data
}

// configMapsIn counts the keys under prefix in a snapshot's database, as
// etcd would restore it, and checks that one holds want.
func configMapsIn(t *testing.T, snapshot []byte, prefix, want string) int {
	names, found := map[string]bool{}, false
	for _, kv := range snapshotKeys(t, snapshot) {
		if strings.HasPrefix(string(kv.Key), prefix) {
			names[string(kv.Key)] = true
			found = found || bytes.Contains(kv.Value, []byte(want))
		}
	}
	require.True(t, found, "a ConfigMap holds %q", want)
	return len(names)
}

// snapshotKeys are the revisions of keys in a snapshot's database, as etcd
// would restore them.
func snapshotKeys(t *testing.T, snapshot []byte) []mvccpb.KeyValue {
	path := filepath.Join(t.TempDir(), "db")
	require.NoError(t, os.WriteFile(path, snapshot[:len(snapshot)-32], 0o600))
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	var kvs []mvccpb.KeyValue
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("key")).ForEach(func(_, v []byte) error {
			var kv mvccpb.KeyValue
			if err := kv.Unmarshal(v); err != nil {
				return err
			}
			kvs = append(kvs, kv)
			return nil
		})
	}))
	return kvs
}
