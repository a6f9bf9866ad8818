package envtest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// TestDualStackClustersRefused applies config/admission, as the release
// bundle installs it, and the real API server enforces it: a Cluster whose
// control plane is a HostedControlPlane and that sets two service or pod
// networks (dual-stack, which the hosted components are not given yet) is
// refused, at creation and when Cluster API's topology controller later
// points it at its control plane, with a message naming the field. Clusters
// of other control planes, single-stack ones, and one stored with two
// networks before the policy (Cluster API must still update and delete it)
// are let through.
func TestDualStackClustersRefused(t *testing.T) {
	parallel(t)
	ctx := testContext(t)
	ns := namespace(t)
	cluster := func(name, kind string, services, pods []string) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		c.Spec.ClusterNetwork.Services.CIDRBlocks = services
		c.Spec.ClusterNetwork.Pods.CIDRBlocks = pods
		if kind != "" {
			group := v1alpha1.GroupVersion.Group
			if kind != "HostedControlPlane" {
				group = "controlplane.cluster.x-k8s.io"
			}
			c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: group, Kind: kind, Name: name}
		}
		return c
	}
	v4, both := []string{"10.96.0.0/12"}, []string{"10.96.0.0/12", "fd00:10:96::/108"}
	pods, bothPods := []string{"192.168.0.0/16"}, []string{"192.168.0.0/16", "fd00:10:244::/56"}
	stored := cluster("stored", "HostedControlPlane", both, bothPods)
	require.NoError(t, env.Client.Create(ctx, stored))

	createConfig(t, "admission", "cluster-network.yaml")
	const refusal = ": dual-stack is not supported yet by HostedControlPlane (its API server, controller manager, CoreDNS and kube-proxy are given one family);" +
		" set one network (IPv4 or IPv6) in spec.clusterNetwork.services.cidrBlocks and pods.cidrBlocks"
	waitFor(t, "the policy in force", func() error {
		probe := cluster("probe", "HostedControlPlane", both, pods)
		err := env.Client.Create(ctx, probe)
		if err == nil {
			_ = env.Client.Delete(ctx, probe)
			return fmt.Errorf("a dual-stack Cluster was created")
		}
		return nil
	})

	for _, c := range []struct {
		cluster *clusterv1.Cluster
		refused string
	}{
		{cluster("two-services", "HostedControlPlane", both, pods), "spec.clusterNetwork: services.cidrBlocks has 2 networks" + refusal},
		{cluster("two-pod-networks", "HostedControlPlane", v4, bothPods), "spec.clusterNetwork: pods.cidrBlocks has 2 networks" + refusal},
		{cluster("single-stack", "HostedControlPlane", v4, pods), ""},
		{cluster("other-control-plane", "KubeadmControlPlane", both, bothPods), ""},
		{cluster("no-control-plane-yet", "", both, bothPods), ""},
	} {
		err := env.Client.Create(ctx, c.cluster)
		if c.refused == "" {
			require.NoError(t, err, c.cluster.Name)
			continue
		}
		require.Error(t, err, c.cluster.Name)
		require.Contains(t, err.Error(), c.refused, c.cluster.Name)
	}

	// Topology creates the Cluster first, then points it at the control
	// plane it created.
	later := &clusterv1.Cluster{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "no-control-plane-yet"}, later))
	before := later.DeepCopy()
	later.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "HostedControlPlane", Name: later.Name}
	err := env.Client.Patch(ctx, later, client.MergeFrom(before))
	require.Error(t, err)
	require.Contains(t, err.Error(), "spec.clusterNetwork: services.cidrBlocks has 2 networks"+refusal)

	// A single-stack Cluster cannot become dual-stack.
	single := &clusterv1.Cluster{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "single-stack"}, single))
	before = single.DeepCopy()
	single.Spec.ClusterNetwork.Pods.CIDRBlocks = bothPods
	err = env.Client.Patch(ctx, single, client.MergeFrom(before))
	require.Error(t, err)
	require.Contains(t, err.Error(), "pods.cidrBlocks has 2 networks"+refusal)

	// Stored before the policy: still updated (a finalizer, as Cluster API
	// adds and removes one) and deleted.
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(stored), stored))
	before = stored.DeepCopy()
	stored.Finalizers = append(stored.Finalizers, "test.example.com/kept")
	require.NoError(t, env.Client.Patch(ctx, stored, client.MergeFrom(before)), "a Cluster stored with two networks is still updated")
	before = stored.DeepCopy()
	stored.Finalizers = nil
	require.NoError(t, env.Client.Patch(ctx, stored, client.MergeFrom(before)))
	require.NoError(t, env.Client.Delete(ctx, stored))
}
