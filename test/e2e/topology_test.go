package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/test/slots"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/local"
)

// classObjects are the ClusterClass and HostedControlPlaneTemplate of
// config/samples, as users apply them (served through the Gateway capi in
// capi-system, which the extension's gatewayName variable names), with one
// change for this cluster: no infrastructure provider runs, so the class
// uses the tests' minimal infrastructure kind, whose template has the
// controlPlaneEndpoint the extension fills in.
func classObjects(t *testing.T) string {
	t.Helper()
	var docs []string
	for _, f := range []string{"clusterclass.yaml", "hostedcontrolplanetemplate.yaml"} {
		b, err := os.ReadFile(filepath.Join(root, "config", "samples", f))
		require.NoError(t, err)
		obj := map[string]any{}
		require.NoError(t, yaml.Unmarshal([]byte(strings.Split(string(b), "\n---\n")[0]), &obj))
		spec := obj["spec"].(map[string]any)
		if obj["kind"] == "ClusterClass" {
			spec["infrastructure"] = map[string]any{"templateRef": map[string]any{
				"apiVersion": "infrastructure.hostedcp.test/v1alpha1", "kind": "TestClusterTemplate", "name": "test",
			}}
		}
		delete(obj["metadata"].(map[string]any), "namespace")
		out, err := yaml.Marshal(obj)
		require.NoError(t, err)
		docs = append(docs, string(out))
	}
	docs = append(docs, `apiVersion: infrastructure.hostedcp.test/v1alpha1
kind: TestClusterTemplate
metadata: {name: test}
spec: {template: {spec: {controlPlaneEndpoint: {}}}}
`)
	return strings.Join(docs, "---\n")
}

var installTestInfrastructure sync.Once

// A Cluster of the sample ClusterClass gets its HostedControlPlane from the
// extension's variables, is served through the Gateway its gatewayName
// variable names, and becomes Available at the previous patch release.
// Its upgrade to the current one is held by the extension while an etcd
// member is stopped, and completes once it is back: API servers first, then
// the controllers, with status.versions moving only at the end.
func TestClusterClassUpgrade(t *testing.T) {
	parallel(t, slots.Uses(sharedGateway))
	installTestInfrastructure.Do(func() {
		b, err := os.ReadFile(filepath.Join(root, "test", "envtest", "extension", "testdata", "infrastructure.yaml"))
		require.NoError(t, err)
		require.NoError(t, cluster.Apply(testContext(t), k8s, b, ""))
	})
	ns := namespace(t, "topology")
	apply(t, ns, classObjects(t))
	apply(t, ns, fmt.Sprintf(`apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: topo}
spec:
  clusterNetwork:
    pods: {cidrBlocks: [192.168.0.0/16]}
    services: {cidrBlocks: [10.128.0.0/16]}
  topology:
    classRef: {name: hosted}
    version: %s
    variables:
    - {name: controlPlaneReplicas, value: 2}
    - {name: etcdReplicas, value: 3}
    - {name: etcdVolumeSize, value: 1Gi}
    - {name: certSANs, value: [api.topo.example]}
    - {name: gatewayName, value: capi}
    - {name: gatewayNamespace, value: capi-system}
`, images.PreviousKubeVersion))
	hcp := controlPlaneOf(t, ns, "topo")
	key := client.ObjectKeyFromObject(hcp)
	require.NoError(t, local.WaitAvailable(testContext(t), k8s, key, 15*time.Minute))

	t.Run("the extension's variables shape the control plane", func(t *testing.T) {
		require.NoError(t, k8s.Get(testContext(t), key, hcp))
		assert.Equal(t, int32(2), *hcp.Spec.Replicas)
		assert.Equal(t, int32(3), *hcp.Spec.Etcd.Replicas)
		assert.Contains(t, hcp.Spec.APIServer.CertSANs, "api.topo.example")
		assert.Equal(t, []string{images.PreviousKubeVersion}, versions(hcp))
		// Served through the Gateway: the gateway hostname and its
		// listener's port, which the extension also gave the
		// infrastructure cluster before the control plane existed.
		endpoint := hcp.Spec.ControlPlaneEndpoint
		assert.Equal(t, clusterv1.APIEndpoint{Host: "topo." + ns + "." + cluster.GatewayDomain, Port: 443}, endpoint)
		infra := &unstructured.Unstructured{}
		infra.SetAPIVersion("infrastructure.hostedcp.test/v1alpha1")
		infra.SetKind("TestCluster")
		c := &clusterv1.Cluster{}
		require.NoError(t, k8s.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "topo"}, c))
		require.NoError(t, k8s.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: c.Spec.InfrastructureRef.Name}, infra))
		host, _, _ := unstructured.NestedString(infra.Object, "spec", "controlPlaneEndpoint", "host")
		port, _, _ := unstructured.NestedInt64(infra.Object, "spec", "controlPlaneEndpoint", "port")
		assert.Equal(t, endpoint.Host, host, "the infrastructure cluster's endpoint")
		assert.Equal(t, int64(endpoint.Port), port, "the infrastructure cluster's endpoint")
		// The serving certificate the API server presents through the
		// Gateway carries the SAN.
		raw, err := cluster.DialContext(testContext(t), "tcp", net.JoinHostPort(endpoint.Host, fmt.Sprint(endpoint.Port)))
		require.NoError(t, err)
		conn := tls.Client(raw, &tls.Config{ServerName: endpoint.Host, InsecureSkipVerify: true}) //nolint:gosec // reading the certificate, not trusting it
		defer func() { _ = conn.Close() }()
		require.NoError(t, conn.HandshakeContext(testContext(t)))
		assert.Contains(t, conn.ConnectionState().PeerCertificates[0].DNSNames, "api.topo.example")
	})

	t.Run("the upgrade waits for etcd and rolls in order", func(t *testing.T) {
		ctx := testContext(t)
		watch := watchRollout(t, key)
		// Stop one etcd member: with the node cordoned, its pod cannot come
		// back.
		setUnschedulable(t, true)
		t.Cleanup(func() { setUnschedulable(t, false) })
		member := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "topo-etcd-2"}}
		require.NoError(t, k8s.Delete(ctx, member))
		c := &clusterv1.Cluster{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "topo"}, c))
		patch := client.MergeFrom(c.DeepCopy())
		c.Spec.Topology.Version = images.KubeVersion
		require.NoError(t, k8s.Patch(ctx, c, patch))

		eventually(t, 3*time.Minute, "Cluster API reports the upgrade held by the extension", func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
				return err
			}
			cond := apimeta.FindStatusCondition(c.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition)
			if cond == nil || !strings.Contains(cond.Message, "etcd") {
				return fmt.Errorf("TopologyReconciled: %+v", cond)
			}
			return nil
		})
		// Held: for a while, nothing moves.
		time.Sleep(20 * time.Second)
		require.NoError(t, k8s.Get(ctx, key, hcp))
		assert.Equal(t, images.PreviousKubeVersion, hcp.Spec.Version, "the control plane's version while etcd misses a member")

		setUnschedulable(t, false)
		require.NoError(t, local.WaitAvailable(ctx, k8s, key, 5*time.Minute))
		eventually(t, 10*time.Minute, "the control plane runs the new version", func() error {
			if err := k8s.Get(ctx, key, hcp); err != nil {
				return err
			}
			if got := versions(hcp); !slices.Equal(got, []string{images.KubeVersion}) {
				return fmt.Errorf("status.versions %v", got)
			}
			return nil
		})
		eventually(t, 5*time.Minute, "the controllers run the new version", func() error {
			for _, name := range []string{"topo-controller-manager", "topo-scheduler"} {
				d := &appsv1.Deployment{}
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
					return err
				}
				if v := imageVersion(d.Spec.Template.Spec.Containers[0].Image); v != images.KubeVersion || d.Status.UpdatedReplicas != d.Status.Replicas {
					return fmt.Errorf("Deployment %s: version %s, %d of %d pods updated", name, v, d.Status.UpdatedReplicas, d.Status.Replicas)
				}
			}
			return nil
		})
		require.NoError(t, local.WaitAvailable(ctx, k8s, key, 5*time.Minute))
		watch.check(t)
	})

	t.Run("deleting the Cluster removes every object and pod", func(t *testing.T) {
		deleteClusters(t, client.ObjectKey{Namespace: ns, Name: "topo"})
	})
}

func setUnschedulable(t *testing.T, on bool) {
	t.Helper()
	node := &corev1.Node{}
	require.NoError(t, k8s.Get(testContext(t), client.ObjectKey{Name: cluster.NodeName}, node))
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Unschedulable = on
	require.NoError(t, k8s.Patch(testContext(t), node, patch))
}

// rollout records what a user watching an upgrade sees, every 500ms.
type rollout struct {
	key  client.ObjectKey // the control plane watched
	mu   sync.Mutex
	done chan struct{}
	wg   sync.WaitGroup
	// apiServersDone is when every API server pod first ran the new
	// version; controllersChanged when the kcm or scheduler Deployment first
	// asked for it.
	apiServersDone, controllersChanged time.Time
	// early are moments status.versions named the new version while an API
	// server pod of the old one was still ready.
	early []string
}

func watchRollout(t *testing.T, key client.ObjectKey) *rollout {
	t.Helper()
	ctx := testContext(t)
	r := &rollout{key: key, done: make(chan struct{})}
	r.wg.Go(func() {
		for {
			select {
			case <-r.done:
				return
			case <-time.After(500 * time.Millisecond):
			}
			r.observe(ctx)
		}
	})
	t.Cleanup(r.stop)
	return r
}

func (r *rollout) stop() {
	select {
	case <-r.done:
	default:
		close(r.done)
	}
	r.wg.Wait()
}

func (r *rollout) observe(ctx context.Context) {
	key := r.key
	hcp := &v1alpha1.HostedControlPlane{}
	pods := &corev1.PodList{}
	if k8s.Get(ctx, key, hcp) != nil || k8s.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels{"cluster.x-k8s.io/cluster-name": hcp.Labels["cluster.x-k8s.io/cluster-name"]}) != nil {
		return
	}
	name := hcp.Labels["cluster.x-k8s.io/cluster-name"]
	oldReady, newReady := 0, 0
	for _, p := range pods.Items {
		// A terminating pod is on its way out: it takes no new connections
		// once its endpoint leaves the Service, whatever its last probe said.
		if !strings.HasPrefix(p.Name, name+"-apiserver-") || !podReady(&p) || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Spec.Containers {
			if c.Name == "kube-apiserver" {
				if imageVersion(c.Image) == images.KubeVersion {
					newReady++
				} else {
					oldReady++
				}
			}
		}
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Contains(versions(hcp), images.KubeVersion) && oldReady > 0 {
		r.early = append(r.early, fmt.Sprintf("%s: status.versions %v with %d old API servers ready", now.Format(time.StampMilli), versions(hcp), oldReady))
	}
	if r.apiServersDone.IsZero() && oldReady == 0 && newReady > 0 {
		r.apiServersDone = now
	}
	for _, d := range []string{name + "-controller-manager", name + "-scheduler"} {
		dep := &appsv1.Deployment{}
		if k8s.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: d}, dep) == nil && r.controllersChanged.IsZero() &&
			imageVersion(dep.Spec.Template.Spec.Containers[0].Image) == images.KubeVersion {
			r.controllersChanged = now
		}
	}
}

// check stops watching after one last look, so a change made less than a
// tick before is seen too.
func (r *rollout) check(t *testing.T) {
	t.Helper()
	r.stop()
	r.observe(testContext(t))
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Empty(t, r.early, "status.versions named the new version before every API server ran it")
	require.False(t, r.apiServersDone.IsZero(), "never saw every API server on the new version")
	require.False(t, r.controllersChanged.IsZero(), "never saw the controllers asked to run the new version")
	assert.False(t, r.controllersChanged.Before(r.apiServersDone),
		"the controllers were changed (%s) before every API server ran the new version (%s)",
		r.controllersChanged.Format(time.StampMilli), r.apiServersDone.Format(time.StampMilli))
}
