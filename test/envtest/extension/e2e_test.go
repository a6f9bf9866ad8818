package extension

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/topology"
)

// sample reads the objects of config/samples/clusterclass.yaml into ns: the
// ClusterClass, with its infrastructure template swapped for the test's (no
// infrastructure provider runs here), and the Cluster.
func sample(t *testing.T, ns string) (clusterClass, cluster *unstructured.Unstructured) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.Root, "config", "samples", "clusterclass.yaml"))
	require.NoError(t, err)
	docs := strings.Split(string(data), "\n---\n")
	require.Len(t, docs, 2)
	clusterClass, cluster = &unstructured.Unstructured{}, &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(docs[0]), &clusterClass.Object))
	require.NoError(t, yaml.Unmarshal([]byte(docs[1]), &cluster.Object))
	require.Equal(t, []string{"ClusterClass", "Cluster"}, []string{clusterClass.GetKind(), cluster.GetKind()})
	require.NoError(t, unstructured.SetNestedStringMap(clusterClass.Object, map[string]string{
		"apiVersion": "infrastructure.hostedcp.test/v1alpha1", "kind": "TestClusterTemplate", "name": "test",
	}, "spec", "infrastructure", "templateRef"))
	clusterClass.SetNamespace(ns)
	cluster.SetNamespace(ns)
	return clusterClass, cluster
}

// setVariable changes the value of a variable of a Cluster's topology.
func setVariable(t *testing.T, cluster *unstructured.Unstructured, name string, value any) {
	t.Helper()
	vars, _, err := unstructured.NestedSlice(cluster.Object, "spec", "topology", "variables")
	require.NoError(t, err)
	for _, v := range vars {
		if v := v.(map[string]any); v["name"] == name {
			v["value"] = value
		}
	}
	require.NoError(t, unstructured.SetNestedSlice(cluster.Object, vars, "spec", "topology", "variables"))
}

// eventually polls check until it returns nil, and fails the test with its
// last error (and the Cluster API manager's last words) when time is up.
func eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v\nCluster API manager:\n%s\nextension:\n%s", what, err, tail(capiLog.Output(), 40), tail(ext.Output(), 40))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func tail(s string, lines int) string {
	all := strings.Split(s, "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// The whole path an operator takes: the real Cluster API manager discovers
// the extension through its ExtensionConfig, lists its variables on a
// ClusterClass, patches the HostedControlPlane and the infrastructure
// cluster of a Cluster's topology, and holds an upgrade while a real etcd
// has a member down, until it is back.
func TestClusterClassTopologyAndUpgradeGate(t *testing.T) {
	capiManager(t)
	ctx := testContext(t)
	ns, gwNS := namespace(t), namespace(t)
	assertHandlersDiscovered(t)
	createGateway(t, gwNS, "capi")
	stored(t, ns, sampleTemplateManifest(t))
	stored(t, ns, testClusterTemplate)
	clusterClass, cluster := sample(t, ns)
	require.NoError(t, k8s.Create(ctx, clusterClass))

	eventually(t, time.Minute, "the ClusterClass lists the extension's variables", func() error {
		return classVariables(t, ns)
	})

	// The sample Cluster, starting a minor version lower and with the
	// Gateway in the test's namespace.
	require.NoError(t, unstructured.SetNestedField(cluster.Object, "v1.35.2", "spec", "topology", "version"))
	setVariable(t, cluster, topology.VarGatewayNamespace, gwNS)
	require.NoError(t, k8s.Create(ctx, cluster))
	key := types.NamespacedName{Namespace: ns, Name: cluster.GetName()}

	hcp := &v1alpha1.HostedControlPlane{}
	eventually(t, time.Minute, "the topology creates the HostedControlPlane", func() error {
		return getControlPlane(ctx, key, hcp)
	})
	assertPatchedControlPlane(t, hcp, gwNS)
	assertInfrastructureEndpoint(t, key, fmt.Sprintf("hosted-demo.%s.k8s.example.com", ns))

	// Three members are enough to hold and release an upgrade; the gate
	// checks the members etcd has, whatever the spec asks for.
	etcd := startEtcd(t, cluster.GetName(), ns)
	etcd.publish()
	markRunning(t, hcp, "v1.35.2")
	eventually(t, time.Minute, "AfterControlPlaneInitialized reaches the extension", func() error {
		return logged("Control plane initialized", ns)
	})

	upgradeWaitsForEtcd(ctx, t, key, hcp, etcd)

	markRunning(t, hcp, "v1.36.3")
	eventually(t, time.Minute, "AfterControlPlaneUpgrade reaches the extension", func() error {
		return logged("Control plane upgraded", ns)
	})

	require.NoError(t, k8s.Delete(ctx, cluster))
	eventually(t, 2*time.Minute, "the Cluster is deleted after BeforeClusterDelete", func() error {
		if err := logged("Cluster is being deleted, closed its etcd connections", ns); err != nil {
			return err
		}
		if err := k8s.Get(ctx, key, &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Cluster is still there (%w)", err)
		}
		return nil
	})
}

// upgradeWaitsForEtcd stops an etcd member, upgrades the Cluster, sees the
// upgrade held (Cluster API asking again and again), then starts the member
// and sees the control plane get the new version.
func upgradeWaitsForEtcd(ctx context.Context, t *testing.T, key types.NamespacedName, hcp *v1alpha1.HostedControlPlane, etcd *etcdCluster) {
	t.Helper()
	etcd.stop(2)
	upgrade(t, key, "v1.36.3")
	hold := fmt.Sprintf("holding the upgrade to v1.36.3 until the control plane is healthy: etcd: no answer from %s; member member-2 does not answer",
		etcd.endpoint(2))
	eventually(t, time.Minute, "the Cluster reports the held upgrade", func() error {
		return topologyMessageContains(ctx, key, hold)
	})
	held := strings.Count(ext.Output(), "Holding an upgrade")
	eventually(t, time.Minute, "Cluster API asks again after retryAfterSeconds", func() error {
		if n := strings.Count(ext.Output(), "Holding an upgrade"); n < held+2 {
			return fmt.Errorf("held %d times so far", n)
		}
		return nil
	})
	require.NoError(t, getControlPlane(ctx, key, hcp))
	assert.Equal(t, "v1.35.2", hcp.Spec.Version, "the control plane keeps its version while etcd is unhealthy")

	etcd.start(2)
	etcd.waitHealthy()
	eventually(t, time.Minute, "the upgrade proceeds once etcd is healthy", func() error {
		if err := getControlPlane(ctx, key, hcp); err != nil {
			return err
		}
		if hcp.Spec.Version != "v1.36.3" {
			return fmt.Errorf("control plane version %s", hcp.Spec.Version)
		}
		return nil
	})
	assert.NoError(t, logged("Control plane is healthy, allowing the upgrade to v1.36.3", key.Namespace))
	assert.NoError(t, logged("Control plane is healthy, allowing the control plane upgrade to v1.36.3", key.Namespace))
}

// Impossible variables stop the topology with ValidateTopology's message,
// before any object is created.
func TestClusterClassTopologyRejectsImpossibleVariables(t *testing.T) {
	capiManager(t)
	ctx := testContext(t)
	ns := namespace(t)
	stored(t, ns, sampleTemplateManifest(t))
	stored(t, ns, testClusterTemplate)
	clusterClass, _ := sample(t, ns)
	require.NoError(t, k8s.Create(ctx, clusterClass))
	eventually(t, time.Minute, "the ClusterClass lists the extension's variables", func() error { return classVariables(t, ns) })
	cluster := stored(t, ns, `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: broken}
spec:
  topology:
    classRef: {name: hosted}
    version: v1.35.2
    variables:
    - {name: gatewayName, value: missing}
    - {name: etcdReplicas, value: 4}
`)
	key := types.NamespacedName{Namespace: ns, Name: cluster.GetName()}
	eventually(t, time.Minute, "the Cluster reports the rejected topology", func() error {
		return topologyMessageContains(ctx, key,
			fmt.Sprintf(`spec.topology.variables[etcdReplicas]: Invalid value: 4: must be odd: 4 etcd members tolerate no more failures than 3, `+
				`and need more of them for a quorum; use 1, 3 or 5, spec.topology.variables[gatewayName]: Invalid value: "%s/missing": no Gateway %s/missing exists`, ns, ns))
	})
	c := &clusterv1.Cluster{}
	require.NoError(t, k8s.Get(testContext(t), key, c))
	assert.False(t, c.Spec.ControlPlaneRef.IsDefined(), "no control plane is created for a rejected topology")
}

func assertHandlersDiscovered(t *testing.T) {
	t.Helper()
	ec := &runtimev1.ExtensionConfig{}
	require.NoError(t, k8s.Get(testContext(t), types.NamespacedName{Name: extensionConfigName}, ec))
	var names []string
	for _, h := range ec.Status.Handlers {
		names = append(names, h.Name)
	}
	assert.ElementsMatch(t, []string{
		"discover-variables.hcp-extension", "generate-patches.hcp-extension", "validate-topology.hcp-extension",
		"before-cluster-create.hcp-extension", "after-control-plane-initialized.hcp-extension",
		"before-cluster-upgrade.hcp-extension", "before-control-plane-upgrade.hcp-extension",
		"after-control-plane-upgrade.hcp-extension", "before-cluster-delete.hcp-extension",
	}, names)
}

// classVariables checks that the ClusterClass's status lists every variable
// of the extension, from its patch, and that the variables are ready.
func classVariables(t *testing.T, ns string) error {
	t.Helper()
	cc := &clusterv1.ClusterClass{}
	if err := k8s.Get(testContext(t), types.NamespacedName{Namespace: ns, Name: "hosted"}, cc); err != nil {
		return err
	}
	if !meta.IsStatusConditionTrue(cc.Status.Conditions, clusterv1.ClusterClassVariablesReadyCondition) {
		return fmt.Errorf("VariablesReady is not true: %+v", cc.Status.Conditions)
	}
	listed := map[string]string{}
	for _, v := range cc.Status.Variables {
		if len(v.Definitions) == 1 {
			listed[v.Name] = v.Definitions[0].From
		}
	}
	for _, v := range topology.Variables() {
		if listed[v.Name] != "hosted-control-plane" { // the sample's patch
			return fmt.Errorf("variable %s is not listed from the patch hosted-control-plane: %v", v.Name, listed)
		}
	}
	return nil
}

func getControlPlane(ctx context.Context, cluster types.NamespacedName, hcp *v1alpha1.HostedControlPlane) error {
	c := &clusterv1.Cluster{}
	if err := k8s.Get(ctx, cluster, c); err != nil {
		return err
	}
	if !c.Spec.ControlPlaneRef.IsDefined() {
		return fmt.Errorf("the Cluster has no controlPlaneRef yet: %v", c.Status.Conditions)
	}
	return k8s.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: c.Spec.ControlPlaneRef.Name}, hcp)
}

// assertPatchedControlPlane checks that every variable of the sample
// Cluster reached the HostedControlPlane.
func assertPatchedControlPlane(t *testing.T, hcp *v1alpha1.HostedControlPlane, gwNS string) {
	t.Helper()
	s := hcp.Spec
	assert.Equal(t, "v1.35.2", s.Version)
	assert.Equal(t, int32(3), ptr.Deref(s.Replicas, 0), "controlPlaneReplicas")
	assert.Equal(t, &v1alpha1.GatewayReference{Name: "capi", Namespace: gwNS}, s.Gateway, "gatewayName, gatewayNamespace")
	assert.Equal(t, []string{"api.example.com"}, s.APIServer.CertSANs, "certSANs")
	assert.Equal(t, int32(5), ptr.Deref(s.Etcd.Replicas, 0), "etcdReplicas")
	assert.Equal(t, "8Gi", s.Etcd.VolumeSize.String(), "etcdVolumeSize")
	require.NotNil(t, s.Etcd.Backup, "etcdBackup")
	assert.Equal(t, "0 3 * * *", s.Etcd.Backup.Schedule)
	assert.Equal(t, int32(7), ptr.Deref(s.Etcd.Backup.RetentionCount, 0), "retentionCount, by its default")
	assert.Equal(t, "etcd-backup", s.Etcd.Backup.Secret.Name)
}

func assertInfrastructureEndpoint(t *testing.T, cluster types.NamespacedName, host string) {
	t.Helper()
	c := &clusterv1.Cluster{}
	require.NoError(t, k8s.Get(testContext(t), cluster, c))
	infra := &unstructured.Unstructured{}
	infra.SetAPIVersion("infrastructure.hostedcp.test/v1alpha1")
	infra.SetKind("TestCluster")
	require.NoError(t, k8s.Get(testContext(t), types.NamespacedName{Namespace: cluster.Namespace, Name: c.Spec.InfrastructureRef.Name}, infra))
	endpoint, _, err := unstructured.NestedMap(infra.Object, "spec", "controlPlaneEndpoint")
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"host": host, "port": int64(443)}, endpoint)
}

// markRunning reports the control plane as running version and Available,
// the part of the contract Cluster API reads. No reconciler runs in these
// tests (see startAdmission): the control plane's pods cannot run here.
func markRunning(t *testing.T, hcp *v1alpha1.HostedControlPlane, version string) {
	t.Helper()
	updateStatus(t, hcp, func() {
		st := &hcp.Status
		st.Versions = []clusterv1.StatusVersion{{Version: version, Replicas: 3}}
		st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.UpToDateReplicas = ptr.To[int32](3), ptr.To[int32](3), ptr.To[int32](3), ptr.To[int32](3)
		st.Initialization.ControlPlaneInitialized = ptr.To(true)
		st.ExternalManagedControlPlane = ptr.To(true)
		st.ObservedGeneration = hcp.Generation
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: v1alpha1.AvailableCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.ReadyReason, ObservedGeneration: hcp.Generation,
		})
	})
}

func upgrade(t *testing.T, cluster types.NamespacedName, version string) {
	t.Helper()
	c := &clusterv1.Cluster{}
	require.NoError(t, k8s.Get(testContext(t), cluster, c))
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Topology.Version = version
	require.NoError(t, k8s.Patch(testContext(t), c, patch))
}

func topologyMessageContains(ctx context.Context, cluster types.NamespacedName, want string) error {
	c := &clusterv1.Cluster{}
	if err := k8s.Get(ctx, cluster, c); err != nil {
		return err
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition)
	if cond == nil || !strings.Contains(cond.Message, want) {
		return fmt.Errorf("TopologyReconciled is %+v, want a message with %q", cond, want)
	}
	return nil
}

// logged checks that the extension logged msg about a Cluster in ns.
func logged(msg, ns string) error {
	for _, line := range strings.Split(ext.Output(), "\n") {
		if strings.Contains(line, msg) && strings.Contains(line, ns) {
			return nil
		}
	}
	return fmt.Errorf("the extension did not log %q for namespace %s", msg, ns)
}
