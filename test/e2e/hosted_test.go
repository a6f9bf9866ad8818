package e2e

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/local"
)

// hostedCluster is a Cluster whose controlPlaneRef is a HostedControlPlane
// of apiServers API servers and etcdMembers etcd members, as users write it,
// on the local cluster's infrastructure (a LocalCluster), so that the
// Cluster becomes Available as on a cloud (local.WaitAvailable waits for it).
//
//nolint:unparam // the upgrade tests start from PreviousKubeVersion
func hostedCluster(name, version string, apiServers, etcdMembers int) string {
	return fmt.Sprintf(`apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: %[1]s
spec:
  clusterNetwork:
    pods: {cidrBlocks: [192.168.0.0/16]}
    services: {cidrBlocks: [10.128.0.0/16]}
  controlPlaneRef:
    apiGroup: controlplane.cluster.x-k8s.io
    kind: HostedControlPlane
    name: %[1]s
  infrastructureRef:
    apiGroup: infrastructure.e2e.hostedcp.io
    kind: LocalCluster
    name: %[1]s
---
apiVersion: infrastructure.e2e.hostedcp.io/v1alpha1
kind: LocalCluster
metadata: {name: %[1]s}
---
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlane
metadata:
  name: %[1]s
  labels: {cluster.x-k8s.io/cluster-name: %[1]s}
spec:
  version: %[2]s
  replicas: %[3]d
  etcd: {replicas: %[4]d, volumeSize: 1Gi}
`, name, version, apiServers, etcdMembers)
}

// A Cluster with a HostedControlPlane of two API servers and three etcd
// members becomes Available; its kubeconfig reaches the hosted API server
// from the host; an OIDC issuer the test runs is trusted through
// spec.oidcProviders and requests are audited to standard output (see
// oidcAndAudit); the API servers scale up and down under a polling client
// that sees no failed request; its network policies, enforced by
// kube-router, keep another tenant's pod from its etcd and controllers and
// its API servers from the management API server; a snapshot of its etcd
// holding 2,000 ConfigMaps lands in S3 (versitygw) when asked for; restored
// in place from it, etcd holds exactly what the snapshot held; deleting the Cluster
// takes a final snapshot and removes every object and pod; the Cluster
// created again with restore: latest has every ConfigMap back.
func TestHostedControlPlane(t *testing.T) {
	parallel(t)
	ns := namespace(t, "direct")
	// The API servers' memory limit gives their Go runtime a GOMEMLIMIT.
	apply(t, ns, hostedCluster("direct", images.KubeVersion, 2, 3)+
		"  deployment: {apiServer: {resources: {requests: {memory: 256Mi}, limits: {memory: 1536Mi}}}}\n")
	key := client.ObjectKey{Namespace: ns, Name: "direct"}
	start := time.Now()
	require.NoError(t, local.WaitAvailable(testContext(t), k8s, key, 15*time.Minute))
	t.Logf("Available %s after the Cluster was created", time.Since(start).Round(time.Second))

	t.Run("the kubeconfig reaches the hosted API server from the host", func(t *testing.T) {
		cfg := hostedConfig(t, ns, "direct")
		hosted, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		version, err := hosted.Discovery().ServerVersion()
		require.NoError(t, err)
		assert.Equal(t, images.KubeVersion, version.GitVersion)
		ctx := testContext(t)
		created, err := hosted.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "hello"}, Data: map[string]string{"from": "host"},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		read, err := hosted.CoreV1().ConfigMaps("default").Get(ctx, "hello", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, created.UID, read.UID)
		assert.Equal(t, "host", read.Data["from"])
		// The API server runs with the GOGC the controller gives it and the
		// GOMEMLIMIT of its memory limit, nine tenths of 1536Mi (Go's runtime
		// metrics, as a Prometheus scrape reads them).
		metrics, err := hosted.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		require.NoError(t, err)
		lines := strings.Split(string(metrics), "\n")
		assert.Contains(t, lines, "go_gc_gogc_percent 50")
		assert.Contains(t, lines, fmt.Sprintf("go_gc_gomemlimit_bytes %g", float64(1536<<20/10*9)))
	})

	t.Run("the control plane's pods run", func(t *testing.T) {
		// Available needs one API server; the second may still be starting.
		hcp := &v1alpha1.HostedControlPlane{}
		eventually(t, 2*time.Minute, "every pod ready", func() error {
			if err := cmp.Or(readyPods(t, ns, "direct-etcd", 3), readyPods(t, ns, "direct-apiserver", 2), k8s.Get(testContext(t), key, hcp)); err != nil {
				return err
			}
			if ready := ptr.Deref(hcp.Status.ReadyReplicas, 0); ready != 2 {
				return fmt.Errorf("status.readyReplicas %d", ready)
			}
			return nil
		})
		assert.Equal(t, []string{images.KubeVersion}, versions(hcp))
		// Each asks for memory (see "What each container asks for"), so
		// none is BestEffort, the first the kubelet evicts.
		pods := &corev1.PodList{}
		require.NoError(t, k8s.List(testContext(t), pods, client.InNamespace(ns), client.MatchingLabels{"cluster.x-k8s.io/cluster-name": "direct"}))
		require.NotEmpty(t, pods.Items)
		for _, p := range pods.Items {
			assert.Equal(t, corev1.PodQOSBurstable, p.Status.QOSClass, "pod %s", p.Name)
		}
	})

	t.Run("network policies keep other tenants out and the API servers in", func(t *testing.T) {
		policiesEnforced(t, ns, "direct")
	})

	t.Run("an OIDC issuer's tokens are accepted and mapped, and requests are audited to standard output and two webhooks", func(t *testing.T) {
		oidcAndAudit(t, ns, "direct")
	})

	t.Run("the API servers scale up and down with no failed request", func(t *testing.T) {
		failures, requests := pollAPIServer(t, hostedConfig(t, ns, "direct"), func() {
			for _, replicas := range []int32{3, 1, 2} {
				scale(t, key, replicas)
			}
		})
		t.Logf("%d requests while scaling, %d failed", requests, len(failures))
		assert.Empty(t, failures, "requests that failed while the API servers scaled")
		assert.Greater(t, requests, int64(50), "the client polled throughout")
	})

	store := startBackupStore(t, "backups")
	t.Run("the backup Secret of another namespace is used only once its owner's ReferenceGrant allows it", func(t *testing.T) {
		hcp := backUp(t, store, key, true)
		eventually(t, time.Minute, "BackupReady RefNotPermitted", func() error {
			require.NoError(t, k8s.Get(testContext(t), key, hcp))
			if c := conditions.Get(hcp, v1alpha1.BackupReadyCondition); c == nil || c.Reason != v1alpha1.RefNotPermittedReason {
				return fmt.Errorf("BackupReady: %+v", c)
			}
			return nil
		})
		// The request refused stays pending until taken; taken once the
		// grant exists, it would be a snapshot of whatever is written then.
		before := hcp.DeepCopy()
		delete(hcp.Annotations, v1alpha1.BackupNowAnnotation)
		require.NoError(t, k8s.Patch(testContext(t), hcp, client.MergeFrom(before)))
		store.grant(t, ns)
	})
	var planted plantedSecret
	t.Run("an etcd snapshot holding 2,000 ConfigMaps lands in S3, a Secret in it encrypted", func(t *testing.T) {
		planted = plantSecret(t, key)
		snapshot := snapshotLands(t, store, key)
		planted.encryptedIn(t, snapshot)
	})

	t.Run("restored in place, the ConfigMaps are the snapshot's and a watcher never sees time go backwards", func(t *testing.T) {
		restoredInPlace(t, key)
	})

	t.Run("deleting the Cluster takes a final snapshot and removes every object and pod", func(t *testing.T) {
		hcp := &v1alpha1.HostedControlPlane{}
		require.NoError(t, k8s.Get(testContext(t), key, hcp))
		deleteClusters(t, key)
		finalSnapshotStored(t, store, key, hcp.Status.Etcd.LastBackupKey)
		podsAndClaimsGone(t, ns)
		encryptionKeyKept(t, key, hcp.Status.Encryption.Key)
		planted.key = hcp.Status.Encryption.Key
	})

	var copied client.ObjectKey
	t.Run("a Cluster of another namespace restores these snapshots only once their owner's ReferenceGrant allows it", func(t *testing.T) {
		copied = copiedOnlyWithGrant(t, store, key, planted)
	})

	t.Run("the Cluster created again with restore: latest has every ConfigMap and the encrypted Secret back", func(t *testing.T) {
		start := time.Now()
		apply(t, ns, restoredCluster("direct", store.secretNamespace, "", 2, 3))
		require.NoError(t, local.WaitAvailable(testContext(t), k8s, key, 15*time.Minute))
		t.Logf("Available %s after the Cluster was created again from its final snapshot", time.Since(start).Round(time.Second))
		everyConfigMapRestored(t, store, key, backupConfigMaps)
		planted.readBack(t, key)
		deleteClusters(t, key)
		if copied.Name != "" {
			deleteClusters(t, copied)
		}
	})
}

// copiedOnlyWithGrant creates, in a namespace of its own, a Cluster whose
// etcd restores the latest snapshot of the deleted Cluster from, as a user
// copies a cluster (its encryption key copied first, as the README says):
// refused, with nothing of the store read, until the owner of from's
// namespace grants it; then the copy comes up with from's ConfigMaps and
// planted Secret. It returns the copy's key.
func copiedOnlyWithGrant(t *testing.T, store *backupStore, from client.ObjectKey, planted plantedSecret) client.ObjectKey {
	ctx := testContext(t)
	key := client.ObjectKey{Namespace: namespace(t, "copy"), Name: "copy"}
	store.grant(t, key.Namespace)
	kept := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: from.Namespace, Name: from.Name + "-encryption"}, kept))
	require.NoError(t, k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name + "-encryption"},
		Data:       map[string][]byte{"encryption-config.yaml": kept.Data["encryption-config.yaml"]},
	}))
	apply(t, key.Namespace, restoredCluster(key.Name, store.secretNamespace, from.String(), 1, 1))
	eventually(t, 2*time.Minute, "EtcdRestored RefNotPermitted", func() error {
		hcp := &v1alpha1.HostedControlPlane{}
		if err := k8s.Get(ctx, key, hcp); err != nil {
			return err
		}
		if c := conditions.Get(hcp, v1alpha1.EtcdRestoredCondition); c == nil || c.Reason != v1alpha1.RefNotPermittedReason {
			return fmt.Errorf("EtcdRestored: %+v", c)
		}
		return nil
	})
	err := k8s.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: contract.EtcdRestoreSecretName(key.Name)}, &corev1.Secret{})
	require.True(t, apierrors.IsNotFound(err), "no restore Secret, so no URL of the snapshot, without the grant: %v", err)

	start := time.Now()
	require.NoError(t, k8s.Create(ctx, &gatewayv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: from.Namespace, Name: "copies-in-" + key.Namespace},
		Spec: gatewayv1beta1.ReferenceGrantSpec{
			From: []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1beta1.Group(v1alpha1.GroupVersion.Group), Kind: "HostedControlPlane", Namespace: gatewayv1beta1.Namespace(key.Namespace)}},
			To:   []gatewayv1beta1.ReferenceGrantTo{{Group: gatewayv1beta1.Group(clusterv1.GroupVersion.Group), Kind: "Cluster", Name: ptr.To(gatewayv1beta1.ObjectName(from.Name))}},
		},
	}))
	require.NoError(t, local.WaitAvailable(ctx, k8s, key, 10*time.Minute))
	t.Logf("Available %s after the grant", time.Since(start).Round(time.Second))
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(ctx, key, hcp))
	require.NotNil(t, hcp.Status.Etcd.RestoredFrom)
	keys := store.snapshotKeys(t, from)
	require.Equal(t, keys[len(keys)-1], hcp.Status.Etcd.RestoredFrom.Key, "the latest snapshot of %s", from)
	hosted, err := kubernetes.NewForConfig(hostedConfig(t, key.Namespace, key.Name))
	require.NoError(t, err)
	writtenConfigMapsAre(t, hosted, backupConfigMaps)
	planted.readBack(t, key)
	return key
}

// restoredCluster is hostedCluster at images.KubeVersion with backups into
// the store's Secret in secretNamespace and etcd restored from the latest
// snapshot of fromCluster (<namespace>/<name>; its own when empty).
func restoredCluster(name, secretNamespace, fromCluster string, apiServers, etcdMembers int) string {
	from := ""
	if fromCluster != "" {
		from = ", fromCluster: " + fromCluster
	}
	return strings.Replace(hostedCluster(name, images.KubeVersion, apiServers, etcdMembers), fmt.Sprintf("etcd: {replicas: %d, volumeSize: 1Gi}", etcdMembers), fmt.Sprintf(
		`etcd: {replicas: %d, volumeSize: 1Gi, backup: {schedule: "0 0 1 1 *", secret: {name: s3, namespace: %s}}, restore: {snapshot: latest%s}}`,
		etcdMembers, secretNamespace, from), 1)
}

// readyPods checks that the Deployment or StatefulSet name has want pods,
// all ready.
func readyPods(t *testing.T, ns, name string, want int) error {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8s.List(testContext(t), pods, client.InNamespace(ns)); err != nil {
		return err
	}
	ready := 0
	for _, p := range pods.Items {
		if owner := metav1.GetControllerOf(&p); owner != nil && (owner.Name == name || isReplicaSetOf(ns, owner.Name, name)) && podReady(&p) {
			ready++
		}
	}
	if ready != want {
		return fmt.Errorf("%d ready pods of %s, not %d", ready, name, want)
	}
	return nil
}

func isReplicaSetOf(ns, replicaSet, deployment string) bool {
	rs := &appsv1.ReplicaSet{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: replicaSet}, rs); err != nil {
		return false
	}
	owner := metav1.GetControllerOf(rs)
	return owner != nil && owner.Name == deployment
}

func versions(hcp *v1alpha1.HostedControlPlane) []string {
	var out []string
	for _, v := range hcp.Status.Versions {
		out = append(out, v.Version)
	}
	return out
}

// scale sets the API server replicas through the scale subresource, as
// kubectl scale does, and waits until that many are ready and up to date.
func scale(t *testing.T, key client.ObjectKey, replicas int32) {
	t.Helper()
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(testContext(t), key, hcp))
	patch := client.MergeFrom(hcp.DeepCopy())
	hcp.Spec.Replicas = &replicas
	require.NoError(t, k8s.Patch(testContext(t), hcp, patch))
	eventually(t, 5*time.Minute, fmt.Sprintf("%d API servers ready", replicas), func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(testContext(t), client.ObjectKey{Namespace: key.Namespace, Name: key.Name + "-apiserver"}, d); err != nil {
			return err
		}
		if d.Status.ReadyReplicas != replicas || d.Status.Replicas != replicas || d.Status.UpdatedReplicas != replicas {
			return fmt.Errorf("%d pods, %d ready, %d up to date", d.Status.Replicas, d.Status.ReadyReplicas, d.Status.UpdatedReplicas)
		}
		return k8s.Get(testContext(t), key, hcp)
	})
	// Give the Service's endpoints and kube-proxy time to follow, under load.
	time.Sleep(5 * time.Second)
}

// pollAPIServer lists namespaces through cfg every 50ms while during runs,
// each request on a new connection (so kube-proxy may pick another API server
// each time), and returns the failed requests and the count of all.
func pollAPIServer(t *testing.T, cfg *rest.Config, during func()) (failures []string, requests int64) {
	t.Helper()
	tlsConfig, err := rest.TLSConfigFor(cfg)
	require.NoError(t, err)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}}
	url := cfg.Host + "/api/v1/namespaces?limit=1"
	var (
		count atomic.Int64
		done  = make(chan struct{})
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			count.Add(1)
			resp, err := hc.Get(url)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("%s", resp.Status)
				}
			}
			if err != nil {
				failures = append(failures, time.Now().Format(time.StampMilli)+": "+err.Error())
			}
		}
	})
	during()
	close(done)
	wg.Wait()
	return failures, count.Load()
}

// deleteClusters deletes Clusters and waits until they and every object of
// theirs are gone: the control planes, Secrets (but encryption keys kept for
// the snapshots), ConfigMaps, Services, workloads, certificates and
// TLSRoutes in their namespaces. Their pods and
// the claims those pods hold still terminate then: TestHostedControlPlane
// waits for that (podsAndClaimsGone), which takes a minute the other tests
// need not spend again.
func deleteClusters(t testing.TB, keys ...client.ObjectKey) {
	t.Helper()
	ctx := testContext(t)
	for _, key := range keys {
		// Tried again for a while: on a host the test loaded to its limit
		// (BenchmarkIdleDensity) Cluster API's webhook may be restarting.
		eventually(t, 2*time.Minute, "Cluster "+key.String()+" deleted", func() error {
			return client.IgnoreNotFound(k8s.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}))
		})
	}
	for _, key := range keys {
		eventually(t, 5*time.Minute, "Cluster "+key.String()+" is gone", func() error {
			if err := k8s.Get(ctx, key, &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%w)", err)
			}
			return nil
		})
		eventually(t, 3*time.Minute, "nothing of Cluster "+key.String()+" is left", func() error {
			return leftIn(ctx, key.Namespace, &v1alpha1.HostedControlPlaneList{}, &corev1.SecretList{}, &corev1.ConfigMapList{},
				&corev1.ServiceList{}, &appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &cmv1.CertificateList{},
				&cmv1.IssuerList{}, &gatewayv1.TLSRouteList{})
		})
	}
}

// podsAndClaimsGone waits until the pods of the deleted Clusters in ns and
// their volume claims are gone too.
func podsAndClaimsGone(t testing.TB, ns string) {
	t.Helper()
	eventually(t, 3*time.Minute, "no pod or claim is left", func() error {
		return leftIn(testContext(t), ns, &corev1.PodList{}, &corev1.PersistentVolumeClaimList{})
	})
}

// userInput labels an object the test wrote as a user would, beside a
// Cluster (a Secret a field of it names): the user's to delete, not the
// Cluster's, so leftIn does not count it.
const userInput = "e2e.hcp.test/user-input"

// leftIn lists the objects of each kind in ns, apart from the namespace's
// own root CA ConfigMap and the user's own objects (userInput), and fails
// when there are any.
func leftIn(ctx context.Context, ns string, lists ...client.ObjectList) error {
	var left []string
	for _, list := range lists {
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, item := range items {
			o, _ := item.(client.Object)
			if o.GetName() == "kube-root-ca.crt" {
				continue // every namespace's own
			}
			if _, user := o.GetLabels()[userInput]; user {
				continue
			}
			if _, kept := o.GetAnnotations()[v1alpha1.EncryptionKeyKeptAnnotation]; kept {
				continue // kept for the snapshots (encryptionKeyKept)
			}
			left = append(left, fmt.Sprintf("%T %s", o, o.GetName()))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left: %v", left)
	}
	return nil
}
