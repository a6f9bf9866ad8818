package backup

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// memBucket keeps a bucket's objects in memory, so that what this package
// decides about them is tested without a server; the S3 client itself is
// tested against a real one (versitygw) in test/envtest/extension.
type memBucket struct {
	objects  map[string][]byte
	presigns int
}

func (b *memBucket) list(_ context.Context, prefix string) ([]string, error) {
	var keys []string
	for key := range b.objects {
		if strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
	}
	return keys, nil
}

func (b *memBucket) put(_ context.Context, key string, r io.Reader, _ uint64) (int64, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	b.objects[key] = data
	return int64(len(data)), nil
}

func (b *memBucket) size(_ context.Context, key string) (int64, bool, error) {
	data, ok := b.objects[key]
	return int64(len(data)), ok, nil
}

func (b *memBucket) remove(_ context.Context, key string) error {
	delete(b.objects, key)
	return nil
}

func (b *memBucket) presign(_ context.Context, key string, _ time.Duration) (string, error) {
	b.presigns++
	return fmt.Sprintf("https://store.example/%s?signature=%d", key, b.presigns), nil
}

func (b *memBucket) close() {}

// restoreFixture is a Restorer over a fake API server holding hcp and objs,
// and a bucket in memory whose root is "hcp/".
type restoreFixture struct {
	restorer *Restorer
	bucket   *memBucket
	c        client.Client
	hcp      *v1alpha1.HostedControlPlane
}

func newRestoreFixture(t *testing.T, objects map[string][]byte, objs ...client.Object) *restoreFixture {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	require.NoError(t, gatewayv1beta1.Install(scheme))
	hcp := &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "prod", UID: "uid-1"}}
	hcp.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(objs, hcp)...).Build()
	f := &restoreFixture{bucket: &memBucket{objects: maps.Clone(objects)}, c: c, hcp: hcp}
	src := origin{secret: client.ObjectKey{Namespace: "team-a", Name: "s3"}, hostKey: "host", bucketKey: "bucket"}
	f.restorer = &Restorer{client: c, apiReader: c, open: func(ctx context.Context, r client.Reader, hcp *v1alpha1.HostedControlPlane, folder string) (*store, error) {
		if err := permitFolder(ctx, r, hcp, folder); err != nil {
			return nil, err
		}
		return &store{objects: f.bucket, origin: src, root: "hcp/", prefix: "hcp/" + folder + "/", ca: []byte("the store's CA")}, nil
	}}
	return f
}

func (f *restoreFixture) secret(t *testing.T) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	require.NoError(t, f.c.Get(t.Context(), client.ObjectKey{Namespace: "team-a", Name: contract.EtcdRestoreSecretName("prod")}, s))
	return s
}

// "latest" is the newest snapshot of the folder, chosen once: a newer one
// stored meanwhile changes nothing, so every member restores the same
// object. The URL is renewed once half its validity passed, for the same
// snapshot, and not before.
func TestPrepareChoosesTheSnapshotOnce(t *testing.T) {
	f := newRestoreFixture(t, map[string][]byte{
		"hcp/team-a/prod/20261120T030000.000Z-rev10.db": []byte("older"),
		"hcp/team-a/prod/20261121T030000.000Z-rev20.db": []byte("newest"),
		"hcp/team-a/prod/notes.txt":                     []byte("not a snapshot"),
		"hcp/team-a/other/20261122T030000.000Z-rev5.db": []byte("another cluster's"),
	})
	req := Request{Snapshot: v1alpha1.LatestSnapshot, Folder: "team-a/prod"}
	key, err := f.restorer.Prepare(t.Context(), f.hcp, "prod", req)
	require.NoError(t, err)
	assert.Equal(t, "hcp/team-a/prod/20261121T030000.000Z-rev20.db", key)
	s := f.secret(t)
	assert.Equal(t, key, string(s.Data[contract.EtcdRestoreKeyKey]))
	assert.Equal(t, "https://store.example/"+key+"?signature=1", string(s.Data[contract.EtcdRestoreURLKey]))
	assert.Equal(t, "the store's CA", string(s.Data[contract.EtcdRestoreCAKey]))
	assert.NotContains(t, s.Data, contract.EtcdRestoreIDKey, "a restore at creation has no ID")
	assert.True(t, metav1.IsControlledBy(s, f.hcp))

	f.bucket.objects["hcp/team-a/prod/20261122T030000.000Z-rev30.db"] = []byte("newer")
	again, err := f.restorer.Prepare(t.Context(), f.hcp, "prod", req)
	require.NoError(t, err)
	assert.Equal(t, key, again)
	assert.Equal(t, 1, f.bucket.presigns, "a URL valid for long enough is kept")

	s.Annotations[urlExpiresAnnotation] = time.Now().Add(RestoreURLExpiry / 3).UTC().Format(time.RFC3339)
	require.NoError(t, f.c.Update(t.Context(), s))
	again, err = f.restorer.Prepare(t.Context(), f.hcp, "prod", req)
	require.NoError(t, err)
	assert.Equal(t, key, again, "renewed for the snapshot chosen")
	assert.Equal(t, "https://store.example/"+key+"?signature=2", string(f.secret(t).Data[contract.EtcdRestoreURLKey]))

	// A restore in place is another restore: its snapshot is chosen anew,
	// and its ID is written beside it.
	inPlace := InPlace(f.hcp, "prod", v1alpha1.LatestSnapshot, "20261123T000000Z")
	key, err = f.restorer.Prepare(t.Context(), f.hcp, "prod", inPlace)
	require.NoError(t, err)
	assert.Equal(t, "hcp/team-a/prod/20261122T030000.000Z-rev30.db", key)
	assert.Equal(t, "20261123T000000Z", string(f.secret(t).Data[contract.EtcdRestoreIDKey]))
}

// A key is restored only when it is a snapshot of a cluster's folder under
// the store's root that the control plane may read, and exists; what is
// refused writes no Secret and names no value.
func TestPrepareRefuses(t *testing.T) {
	objects := map[string][]byte{
		"hcp/team-a/prod/20261121T030000.000Z-rev20.db":   []byte("ours"),
		"hcp/team-b/victim/20261121T030000.000Z-rev7.db":  []byte("another tenant's"),
		"elsewhere/team-a/prod/20261121T030000.000Z-rev1": []byte("outside the root"),
	}
	for _, tc := range []struct {
		name, snapshot, folder, reason, says string
	}{
		{
			"another tenant's key", "hcp/team-b/victim/20261121T030000.000Z-rev7.db", "team-a/prod", v1alpha1.RefNotPermittedReason,
			"the snapshots of Cluster team-b/victim: ",
		},
		{"another tenant's folder", v1alpha1.LatestSnapshot, "team-b/victim", v1alpha1.RefNotPermittedReason, "the snapshots of Cluster team-b/victim: "},
		{
			"a key outside the root", "elsewhere/team-a/prod/20261121T030000.000Z-rev1", "team-a/prod", v1alpha1.RefNotPermittedReason,
			"snapshot elsewhere/team-a/prod/20261121T030000.000Z-rev1 is not a snapshot of a cluster's folder under the bucket prefix",
		},
		{
			"a missing key", "hcp/team-a/prod/20261101T030000.000Z-rev1.db", "team-a/prod", v1alpha1.SnapshotNotFoundReason,
			"snapshot hcp/team-a/prod/20261101T030000.000Z-rev1.db does not exist in the store of backup Secret team-a/s3",
		},
		{
			"an empty folder", v1alpha1.LatestSnapshot, "team-a/new", v1alpha1.SnapshotNotFoundReason,
			"no snapshot of Cluster team-a/new in the store of backup Secret team-a/s3",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRestoreFixture(t, objects)
			_, err := f.restorer.Prepare(t.Context(), f.hcp, "prod", Request{Snapshot: tc.snapshot, Folder: tc.folder})
			require.Error(t, err)
			assert.Equal(t, tc.reason, Reason(err))
			assert.Contains(t, err.Error(), tc.says)
			assert.Zero(t, f.bucket.presigns)
			err = f.c.Get(t.Context(), client.ObjectKey{Namespace: "team-a", Name: contract.EtcdRestoreSecretName("prod")}, &corev1.Secret{})
			assert.True(t, client.IgnoreNotFound(err) == nil && err != nil, "no restore Secret: %v", err)
		})
	}

	// With team-b's grant, its snapshots may be restored.
	grant := &gatewayv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "restore-to-team-a"},
		Spec: gatewayv1beta1.ReferenceGrantSpec{
			From: []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1beta1.Group(v1alpha1.GroupVersion.Group), Kind: "HostedControlPlane", Namespace: "team-a"}},
			To:   []gatewayv1beta1.ReferenceGrantTo{{Group: "cluster.x-k8s.io", Kind: "Cluster"}},
		},
	}
	f := newRestoreFixture(t, objects, grant)
	key, err := f.restorer.Prepare(t.Context(), f.hcp, "prod", Request{Snapshot: v1alpha1.LatestSnapshot, Folder: "team-b/victim"})
	require.NoError(t, err)
	assert.Equal(t, "hcp/team-b/victim/20261121T030000.000Z-rev7.db", key)
}

// Retention keeps the newest snapshots of the cluster's own folder and
// nothing else is touched: other objects there, other clusters' snapshots.
func TestRetentionKeepsTheNewest(t *testing.T) {
	b := &memBucket{objects: map[string][]byte{}}
	for day := 20; day <= 24; day++ {
		b.objects[fmt.Sprintf("hcp/team-a/prod/202611%dT030000.000Z-rev%d.db", day, day)] = []byte("snapshot")
	}
	b.objects["hcp/team-a/prod/notes.txt"] = []byte("kept")
	b.objects["hcp/team-a/prod-2/20261101T030000.000Z-rev1.db"] = []byte("another cluster's")
	st := &store{objects: b, root: "hcp/", prefix: "hcp/team-a/prod/"}
	deleted, err := st.keepNewest(t.Context(), 3)
	require.NoError(t, err)
	assert.Equal(t, []string{"hcp/team-a/prod/20261120T030000.000Z-rev20.db", "hcp/team-a/prod/20261121T030000.000Z-rev21.db"}, deleted)
	left := slices.Sorted(maps.Keys(b.objects))
	assert.Equal(t, []string{
		"hcp/team-a/prod-2/20261101T030000.000Z-rev1.db",
		"hcp/team-a/prod/20261122T030000.000Z-rev22.db", "hcp/team-a/prod/20261123T030000.000Z-rev23.db",
		"hcp/team-a/prod/20261124T030000.000Z-rev24.db", "hcp/team-a/prod/notes.txt",
	}, left)
}

// Restored names the snapshot of spec.etcd.restore only once this control
// plane's etcd answered (its members ConfigMap says existing), not for a
// ConfigMap another control plane of the same name left.
func TestRestoredOnceEtcdAnswered(t *testing.T) {
	f := newRestoreFixture(t, map[string][]byte{"hcp/team-a/prod/20261121T030000.000Z-rev20.db": []byte("s")})
	key, err := f.restorer.Prepare(t.Context(), f.hcp, "prod", Request{Snapshot: v1alpha1.LatestSnapshot, Folder: "team-a/prod"})
	require.NoError(t, err)
	got, err := f.restorer.Restored(t.Context(), f.hcp, "prod")
	require.NoError(t, err)
	assert.Empty(t, got, "etcd has not answered")

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "prod-etcd-members", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: "HostedControlPlane", Name: "prod", UID: "an earlier one",
		}}},
		Data: map[string]string{"ETCD_INITIAL_CLUSTER_STATE": "existing"},
	}
	require.NoError(t, f.c.Create(t.Context(), cm))
	got, err = f.restorer.Restored(t.Context(), f.hcp, "prod")
	require.NoError(t, err)
	assert.Empty(t, got, "another control plane's etcd")

	cm.OwnerReferences[0].UID = f.hcp.UID
	require.NoError(t, f.c.Update(t.Context(), cm))
	got, err = f.restorer.Restored(t.Context(), f.hcp, "prod")
	require.NoError(t, err)
	assert.Equal(t, key, got)
}
