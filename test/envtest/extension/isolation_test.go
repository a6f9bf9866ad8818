package extension

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/refgrant"
	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
)

// lockedBuffer collects a controller's log from its goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tenantClient acts as a tenant: the ServiceAccount tenant of namespace ns,
// impersonated, with the built-in admin role in ns and rights on the
// Cluster API and control plane kinds there, as a platform team grants
// them, and nothing anywhere else.
func tenantClient(t *testing.T, ns string) client.Client {
	t.Helper()
	ctx := testContext(t)
	require.NoError(t, k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}}))
	require.NoError(t, k8s.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "clusters"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{clusterv1.GroupVersion.Group, v1alpha1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"*"},
		}},
	}))
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}}
	for name, role := range map[string]rbacv1.RoleRef{
		"admin":    {APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		"clusters": {APIGroup: rbacv1.GroupName, Kind: "Role", Name: "clusters"},
	} {
		require.NoError(t, k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-" + name}, Subjects: subject, RoleRef: role}))
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":tenant"}
	c, err := client.New(cfg, client.Options{Scheme: scheme()})
	require.NoError(t, err)
	eventually(t, 30*time.Second, "the tenant's rights", func() error {
		return c.List(ctx, &v1alpha1.HostedControlPlaneList{}, client.InNamespace(ns))
	})
	return c
}

// tenantControlPlane is what a tenant creates: a Cluster and its control
// plane with etcd backups, in its namespace.
func tenantControlPlane(t *testing.T, tenant client.Client, ns, name string, change func(*v1alpha1.HostedControlPlane)) (*v1alpha1.HostedControlPlane, error) {
	t.Helper()
	ctx := testContext(t)
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "HostedControlPlane", Name: name}
	require.NoError(t, tenant.Create(ctx, c))
	hcp := &v1alpha1.HostedControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: name, UID: c.UID,
		}}},
		Spec: v1alpha1.HostedControlPlaneSpec{Version: "v1.35.2"},
	}
	hcp.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "0 0 1 1 *", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}
	change(hcp)
	return hcp, tenant.Create(ctx, hcp)
}

// waitRefused waits until condition says RefNotPermitted on the control
// plane, and returns its message.
func waitRefused(t *testing.T, hcp *v1alpha1.HostedControlPlane, condition string) string {
	t.Helper()
	reason := v1alpha1.RefNotPermittedReason
	var msg string
	eventually(t, time.Minute, condition+" "+reason+" on "+hcp.Name, func() error {
		got := &v1alpha1.HostedControlPlane{}
		require.NoError(t, k8s.Get(testContext(t), client.ObjectKeyFromObject(hcp), got))
		c := conditions.Get(got, condition)
		if c == nil || c.Reason != reason {
			return fmt.Errorf("%s: %+v", condition, c)
		}
		msg = c.Message
		return nil
	})
	return msg
}

func grant(t *testing.T, ns, name, fromNS, kind, group, to string) *gatewayv1beta1.ReferenceGrant {
	t.Helper()
	g := &gatewayv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gatewayv1beta1.ReferenceGrantSpec{
			From: []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1beta1.Group(v1alpha1.GroupVersion.Group), Kind: "HostedControlPlane", Namespace: gatewayv1beta1.Namespace(fromNS)}},
			To:   []gatewayv1beta1.ReferenceGrantTo{{Group: gatewayv1beta1.Group(group), Kind: gatewayv1beta1.Kind(kind), Name: ptr.To(gatewayv1beta1.ObjectName(to))}},
		},
	}
	require.NoError(t, k8s.Create(testContext(t), g))
	return g
}

func annotate(t *testing.T, c client.Client, hcp *v1alpha1.HostedControlPlane, key, value string) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &v1alpha1.HostedControlPlane{}
		require.NoError(t, c.Get(testContext(t), client.ObjectKeyFromObject(hcp), got))
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		got.Annotations[key] = value
		return c.Update(testContext(t), got)
	}))
}

func noRestoreSecret(t *testing.T, ns, cluster string) {
	t.Helper()
	err := k8s.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: contract.EtcdRestoreSecretName(cluster)}, &corev1.Secret{})
	require.True(t, apierrors.IsNotFound(err), "no restore Secret (and no presigned URL) for %s: %v", cluster, err)
}

// TestTenantIsolation: a tenant with an admin RoleBinding in its own
// namespace only, impersonated, tries every way our API offered around that
// boundary: reading another team's CA key through the backup Secret's keys,
// a missing Secret's existence, copying another team's etcd through
// restore.fromCluster, a snapshot key or a restore in place, and a key
// outside the store's folders. Each is refused (admission) or inert (the
// condition says RefNotPermitted and names the grant that is missing,
// nothing is read, no restore Secret is written), and no planted value
// appears in any status, event or the controller's log. With the owner's
// ReferenceGrant, a platform-owned backup Secret and another namespace's
// snapshots work, and the grant is checked at every use: deleted, it stops
// the next snapshot.
func TestTenantIsolation(t *testing.T) {
	ctx := testContext(t)
	tenantNS, victimNS, platformNS := namespace(t), namespace(t), namespace(t)
	s3 := startS3(t)
	bucket := "bkt" + randomString(t)
	require.NoError(t, s3.client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}))
	for _, ns := range []string{tenantNS, victimNS, platformNS} {
		require.NoError(t, k8s.Create(ctx, s3.backupSecret(ns, bucket+"/hcp")))
	}
	victimCA := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: victimNS, Name: "victim-ca"},
		Data: map[string][]byte{
			"tls.key": []byte("PLANTED-CA-KEY-" + randomString(t)), "tls.crt": []byte("PLANTED-CA-CRT-" + randomString(t)),
			"ca.crt": []byte("PLANTED-CA-BUNDLE-" + randomString(t)),
		},
	}
	require.NoError(t, k8s.Create(ctx, victimCA))
	planted := []string{s3.access, s3.secret, s3.relay.addr, bucket}
	for _, v := range victimCA.Data {
		planted = append(planted, string(v))
	}
	logs := &lockedBuffer{}
	startControllers(t, testOptions(10*time.Second), logs, tenantNS, victimNS)

	// The victim backs up its etcd into its own folder.
	victimDB := startEtcd(t, "victim", victimNS)
	victimDB.publish()
	victim := backedUpControlPlane(t, victimNS, "victim", "victim", v1alpha1.EtcdBackup{Schedule: "0 0 1 1 *", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}})
	askForSnapshot(t, client.ObjectKeyFromObject(victim))
	waitBackedUp(t, client.ObjectKeyFromObject(victim), "", "the victim's snapshot")
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(victim), victim))
	victimKey := victim.Status.Etcd.LastBackupKey
	require.True(t, strings.HasPrefix(victimKey, "hcp/"+victimNS+"/victim/"), victimKey)

	tenant := tenantClient(t, tenantNS)
	err := tenant.Get(ctx, client.ObjectKeyFromObject(victimCA), &corev1.Secret{})
	require.True(t, apierrors.IsForbidden(err), "the tenant cannot read the victim's Secret itself: %v", err)

	t.Run("the CA key read as the credentials of a store", func(t *testing.T) {
		_, err := tenantControlPlane(t, tenant, tenantNS, "same-key", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Etcd.Backup.Secret = v1alpha1.EtcdBackupSecret{Name: "victim-ca", Namespace: ptr.To(victimNS), HostKey: ptr.To("tls.key"), SecretAccessKeyKey: ptr.To("tls.key")}
		})
		require.ErrorContains(t, err, `spec.etcd.backup.secret.hostKey: Invalid value: "tls.key": is also spec.etcd.backup.secret.secretAccessKeyKey: each setting of the store must come from a key of its own`)

		hcp, err := tenantControlPlane(t, tenant, tenantNS, "steal-ca", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Etcd.Backup.Secret = v1alpha1.EtcdBackupSecret{
				Name: "victim-ca", Namespace: ptr.To(victimNS),
				HostKey: ptr.To("tls.key"), BucketKey: ptr.To("tls.crt"), AccessKeyIDKey: ptr.To("tls.key2"), SecretAccessKeyKey: ptr.To("tls.key3"),
			}
		})
		require.NoError(t, err, "admitted: the grant may come later")
		askForSnapshot(t, client.ObjectKeyFromObject(hcp))
		msg := waitRefused(t, hcp, v1alpha1.BackupReadyCondition)
		assert.Equal(t, fmt.Sprintf("spec.etcd.backup.secret: Secret %[1]s/victim-ca is in another namespace, and no ReferenceGrant there allows HostedControlPlanes of namespace %[2]s to use it: "+
			`the owner of namespace %[1]s grants it with a ReferenceGrant whose from has group controlplane.cluster.x-k8s.io, kind HostedControlPlane, namespace %[2]s and whose to has group "", kind Secret (name victim-ca, or none for every one)`,
			victimNS, tenantNS), msg)
		requireEvent(t, tenantNS, hcp.Name, v1alpha1.RefNotPermittedReason, "no ReferenceGrant there allows")

		// Whether a Secret exists there is not told either.
		missing, err := tenantControlPlane(t, tenant, tenantNS, "probe", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Etcd.Backup.Secret = v1alpha1.EtcdBackupSecret{Name: "does-not-exist", Namespace: ptr.To(victimNS)}
		})
		require.NoError(t, err)
		askForSnapshot(t, client.ObjectKeyFromObject(missing))
		assert.Equal(t, strings.ReplaceAll(msg, "victim-ca", "does-not-exist"),
			waitRefused(t, missing, v1alpha1.BackupReadyCondition))
	})

	t.Run("another namespace's etcd copied", func(t *testing.T) {
		from, err := tenantControlPlane(t, tenant, tenantNS, "copy", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Etcd.Restore = &v1alpha1.EtcdRestore{Snapshot: v1alpha1.LatestSnapshot, FromCluster: victimNS + "/victim"}
		})
		require.NoError(t, err)
		assert.Contains(t, waitRefused(t, from, v1alpha1.EtcdRestoredCondition),
			fmt.Sprintf("the snapshots of Cluster %[1]s/victim: Cluster %[1]s/victim is in another namespace, and no ReferenceGrant there allows HostedControlPlanes of namespace %[2]s", victimNS, tenantNS))
		noRestoreSecret(t, tenantNS, "copy")

		byKey, err := tenantControlPlane(t, tenant, tenantNS, "copy-key", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Etcd.Restore = &v1alpha1.EtcdRestore{Snapshot: victimKey}
		})
		require.NoError(t, err)
		assert.Contains(t, waitRefused(t, byKey, v1alpha1.EtcdRestoredCondition), "Cluster "+victimNS+"/victim is in another namespace")
		noRestoreSecret(t, tenantNS, "copy-key")

		outside, err := tenantControlPlane(t, tenant, tenantNS, "outside", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Etcd.Restore = &v1alpha1.EtcdRestore{Snapshot: "elsewhere/" + tenantNS + "/outside/20260102T030405.000Z-rev1.db"}
		})
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf(`etcd does not start until its snapshot is found: snapshot elsewhere/%s/outside/20260102T030405.000Z-rev1.db is not a snapshot of a cluster's folder under the bucket prefix that key "bucket" of backup Secret %s/s3 names`, tenantNS, tenantNS),
			waitRefused(t, outside, v1alpha1.EtcdRestoredCondition))
		noRestoreSecret(t, tenantNS, "outside")
	})

	// The tenant's own control plane, backed up into its own folder.
	ownDB := startEtcd(t, "own", tenantNS)
	ownDB.publish()
	own, err := tenantControlPlane(t, tenant, tenantNS, "own", func(*v1alpha1.HostedControlPlane) {})
	require.NoError(t, err)
	askForSnapshot(t, client.ObjectKeyFromObject(own))
	waitBackedUp(t, client.ObjectKeyFromObject(own), "", "the tenant's own snapshot")

	t.Run("another namespace's snapshot restored in place", func(t *testing.T) {
		annotate(t, tenant, own, v1alpha1.RestoreEtcdAnnotation, victimKey)
		assert.Contains(t, waitRefused(t, own, v1alpha1.EtcdRestoredCondition),
			"etcd is not restored in place, and nothing was stopped: the snapshots of Cluster "+victimNS+"/victim")
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(own), own))
		assert.Nil(t, own.Status.Etcd.Restoring, "no restore under way")
		noRestoreSecret(t, tenantNS, "own")
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			require.NoError(t, tenant.Get(ctx, client.ObjectKeyFromObject(own), own))
			delete(own.Annotations, v1alpha1.RestoreEtcdAnnotation)
			return tenant.Update(ctx, own)
		}))
	})

	t.Run("a platform Secret shared by a grant, checked at every use", func(t *testing.T) {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			require.NoError(t, tenant.Get(ctx, client.ObjectKeyFromObject(own), own))
			own.Spec.Etcd.Backup.Secret.Namespace = ptr.To(platformNS)
			return tenant.Update(ctx, own)
		}))
		askForSnapshot(t, client.ObjectKeyFromObject(own))
		assert.Contains(t, waitRefused(t, own, v1alpha1.BackupReadyCondition), "Secret "+platformNS+"/s3 is in another namespace")
		g := grant(t, platformNS, "backups", tenantNS, "Secret", "", "s3")
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(own), own))
		waitBackedUp(t, client.ObjectKeyFromObject(own), own.Status.Etcd.LastBackupKey, "a snapshot through the granted Secret")
		require.NoError(t, k8s.Delete(ctx, g))
		askForSnapshot(t, client.ObjectKeyFromObject(own))
		waitRefused(t, own, v1alpha1.BackupReadyCondition)
	})

	t.Run("another namespace's snapshots restored with its owner's grant", func(t *testing.T) {
		grant(t, victimNS, "migration", tenantNS, "Cluster", clusterv1.GroupVersion.Group, "victim")
		migrated, err := tenantControlPlane(t, tenant, tenantNS, "migrated", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Etcd.Restore = &v1alpha1.EtcdRestore{Snapshot: v1alpha1.LatestSnapshot, FromCluster: victimNS + "/victim"}
		})
		require.NoError(t, err)
		waitRestorePending(t, migrated, victimKey)
	})

	// Nothing planted shows anywhere the tenant reads, nor in the log.
	var seen []string
	for _, ns := range []string{tenantNS, victimNS} {
		hcps := &v1alpha1.HostedControlPlaneList{}
		require.NoError(t, k8s.List(ctx, hcps, client.InNamespace(ns)))
		events := &eventsv1.EventList{}
		require.NoError(t, k8s.List(ctx, events, client.InNamespace(ns)))
		for _, obj := range []any{hcps, events} {
			data, err := json.Marshal(obj)
			require.NoError(t, err)
			seen = append(seen, string(data))
		}
	}
	seen = append(seen, logs.String())
	require.NotEmpty(t, logs.String(), "the controller logged")
	for _, text := range seen {
		for _, value := range planted {
			require.NotContains(t, text, value, "a value read from a Secret")
		}
	}
}

// TestReferencesWithoutGrantAPI: where the ReferenceGrant CRD is not
// installed, a reference to another namespace is refused, and the error
// says why; one within the namespace needs nothing.
func TestReferencesWithoutGrantAPI(t *testing.T) {
	bare, err := envtest.StartWith(envtest.CAPICRDs)
	require.NoError(t, err)
	t.Cleanup(func() { _ = bare.Stop() })
	c, err := client.New(bare.Config, client.Options{Scheme: scheme()})
	require.NoError(t, err)
	ctx := testContext(t)
	err = refgrant.Check(ctx, c, "tenant-a", refgrant.Target{Kind: "Secret", Namespace: "capi-system", Name: "s3"})
	require.ErrorIs(t, err, refgrant.ErrNotPermitted)
	assert.Equal(t, "Secret capi-system/s3 is in another namespace, and references to other namespaces need Gateway API's ReferenceGrant "+
		"(gateway.networking.k8s.io/v1beta1), whose CRD is not installed in the management cluster", err.Error())
	require.NoError(t, refgrant.Check(ctx, c, "tenant-a", refgrant.Target{Kind: "Secret", Namespace: "tenant-a", Name: "s3"}))
}
