package envtest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	hcpcontroller "github.com/hostedcp/cluster-api-provider-hosted/internal/controller"
)

// Two controllers split a fleet, first by Cluster API's watch-filter label,
// then by namespace: each serves the control planes of its shard, and a
// control plane of the other shard stays untouched while only one runs,
// however long that one has been serving its own.
func TestShardedControllers(t *testing.T) {
	serial(t)
	t.Run("by watch-filter label", func(t *testing.T) {
		ns := namespace(t)
		withControllerSettings(t, "WATCH_FILTER=shard-a")
		other := startShard(t, "WATCH_FILTER=shard-b")
		a1, b1 := shardedControlPlane(t, ns, "a1", "shard-a"), shardedControlPlane(t, ns, "b1", "shard-b")
		waitServed(t, a1)
		waitServed(t, b1)
		stopShard(t, other)
		b2, a2 := shardedControlPlane(t, ns, "b2", "shard-b"), shardedControlPlane(t, ns, "a2", "shard-a")
		waitServed(t, a2)
		assertUntouched(t, b2)
	})
	t.Run("by namespace", func(t *testing.T) {
		nsA, nsB := namespace(t), namespace(t)
		withControllerSettings(t, "WATCH_NAMESPACES="+nsA)
		other := startShard(t, "WATCH_NAMESPACES="+nsB)
		a1, b1 := shardedControlPlane(t, nsA, "a1", ""), shardedControlPlane(t, nsB, "b1", "")
		waitServed(t, a1)
		waitServed(t, b1)
		stopShard(t, other)
		b2, a2 := shardedControlPlane(t, nsB, "b2", ""), shardedControlPlane(t, nsA, "a2", "")
		waitServed(t, a2)
		assertUntouched(t, b2)
	})
}

// startShard starts a second controller beside the shared one, without
// webhooks (the shared one serves them for every shard).
func startShard(t *testing.T, settings ...string) *Process {
	t.Helper()
	p, err := env.StartController(binDir, append(settings, "ENABLE_WEBHOOKS=false")...)
	require.NoError(t, err)
	t.Cleanup(func() { stopShard(t, p) })
	return p
}

func stopShard(t *testing.T, p *Process) {
	t.Helper()
	if exited, _ := p.Exited(); exited {
		return
	}
	if err := p.Stop(30 * time.Second); err != nil {
		t.Logf("the second controller was killed: %.300s", err)
	}
}

// shardedControlPlane is a Cluster and its control plane, both labelled
// for the shard filter when it is set, as Cluster API's convention asks.
func shardedControlPlane(t *testing.T, ns, name, filter string) *v1alpha1.HostedControlPlane {
	t.Helper()
	label := func(obj client.Object) {
		if filter != "" {
			labels := obj.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels[clusterv1.WatchLabel] = filter
			obj.SetLabels(labels)
			require.NoError(t, env.Client.Update(testContext(t), obj))
		}
	}
	cluster := newCluster(t, ns, name, 0)
	label(cluster)
	return newControlPlane(t, cluster, func(h *v1alpha1.HostedControlPlane) {
		if filter != "" {
			h.Labels[clusterv1.WatchLabel] = filter
		}
	})
}

// waitServed waits for a controller to have passed over the control plane:
// its finalizer added and its conditions written.
func waitServed(t *testing.T, hcp *v1alpha1.HostedControlPlane) {
	t.Helper()
	waitFor(t, hcp.Namespace+"/"+hcp.Name+" served", func() error {
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp); err != nil {
			return err
		}
		if !slices.Contains(hcp.Finalizers, hcpcontroller.Finalizer) || len(hcp.Status.Conditions) == 0 {
			return fmt.Errorf("finalizers %v, %d conditions", hcp.Finalizers, len(hcp.Status.Conditions))
		}
		return nil
	})
}

// assertUntouched checks, for a few seconds more, that no controller passed
// over the control plane.
func assertUntouched(t *testing.T, hcp *v1alpha1.HostedControlPlane) {
	t.Helper()
	for range 30 {
		require.NoError(t, env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp))
		assert.Empty(t, hcp.Finalizers, "%s/%s is of the stopped shard", hcp.Namespace, hcp.Name)
		assert.Empty(t, hcp.Status.Conditions, "%s/%s is of the stopped shard", hcp.Namespace, hcp.Name)
		if t.Failed() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
