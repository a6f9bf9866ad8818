package extension

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/hooks"
)

// gate asks the running extension, over TLS as Cluster API does, whether
// the Cluster may be upgraded, through both upgrade gates.
type gate struct {
	t       *testing.T
	cluster clusterv1.Cluster
}

func (g gate) ask(hook string) runtimehooksv1.RetryResponseObject {
	g.t.Helper()
	common := runtimehooksv1.CommonRequest{Settings: map[string]string{hooks.RetryAfterSetting: "7"}}
	if hook == hooks.BeforeControlPlaneUpgradeHandler {
		resp := &runtimehooksv1.BeforeControlPlaneUpgradeResponse{}
		callHook(g.t, runtimehooksv1.BeforeControlPlaneUpgrade, hook, &runtimehooksv1.BeforeControlPlaneUpgradeRequest{
			CommonRequest: common, Cluster: g.cluster, FromKubernetesVersion: "v1.35.2", ToKubernetesVersion: "v1.36.3",
		}, resp)
		return resp
	}
	resp := &runtimehooksv1.BeforeClusterUpgradeResponse{}
	callHook(g.t, runtimehooksv1.BeforeClusterUpgrade, hook, &runtimehooksv1.BeforeClusterUpgradeRequest{
		CommonRequest: common, Cluster: g.cluster, FromKubernetesVersion: "v1.35.2", ToKubernetesVersion: "v1.36.3",
	}, resp)
	return resp
}

// holds checks that both gates hold the upgrade for the reasons given.
func (g gate) holds(reasons string) {
	g.t.Helper()
	for hook, what := range map[string]string{
		hooks.BeforeClusterUpgradeHandler:      "the upgrade to v1.36.3",
		hooks.BeforeControlPlaneUpgradeHandler: "the control plane upgrade to v1.36.3",
	} {
		resp := g.ask(hook)
		assert.Equal(g.t, runtimehooksv1.ResponseStatusSuccess, resp.GetStatus(), hook)
		assert.Equal(g.t, int32(7), resp.GetRetryAfterSeconds(), "%s: retry after the ExtensionConfig's setting", hook)
		assert.Equal(g.t, "holding "+what+" until the control plane is healthy: "+reasons, resp.GetMessage(), hook)
	}
}

func (g gate) allows() {
	g.t.Helper()
	for _, hook := range []string{hooks.BeforeClusterUpgradeHandler, hooks.BeforeControlPlaneUpgradeHandler} {
		resp := g.ask(hook)
		assert.Equal(g.t, runtimehooksv1.ResponseStatusSuccess, resp.GetStatus(), hook)
		assert.Zero(g.t, resp.GetRetryAfterSeconds(), hook)
		assert.Empty(g.t, resp.GetMessage(), hook)
	}
}

// The upgrade gates follow the HostedControlPlane's Available condition and
// the health of a real etcd, reached as the controller publishes it.
func TestUpgradeGatesFollowControlPlaneHealth(t *testing.T) {
	ns := namespace(t)
	hcp := createHostedControlPlane(t, ns, "demo")
	g := gate{t: t, cluster: clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: v1alpha1.GroupVersion.Group, Kind: "HostedControlPlane", Name: hcp.Name,
		}},
	}}
	g.holds(fmt.Sprintf("HostedControlPlane %s/demo reports no Available condition yet; "+
		"etcd: client certificate Secret %s/demo-etcd-healthcheck-client does not exist", ns, ns))

	etcd := startEtcd(t, "demo", ns)
	etcd.publish()
	setAvailable(t, hcp, metav1.ConditionFalse, "APIServerNotReady", "0 of 2 API servers answer")
	g.holds(fmt.Sprintf("HostedControlPlane %s/demo is not Available (APIServerNotReady: 0 of 2 API servers answer)", ns))

	setAvailable(t, hcp, metav1.ConditionTrue, "Available", "")
	g.allows()

	etcd.setAlarm(1, true)
	g.holds("etcd: alarm NOSPACE is raised on member member-1")
	etcd.setAlarm(1, false)
	g.allows()

	// A member whose endpoint is not ready is not dialled, but the member
	// list still counts it.
	slice := &discoveryv1.EndpointSlice{}
	require.NoError(t, k8s.Get(testContext(t), types.NamespacedName{Namespace: ns, Name: contract.EtcdName("demo") + "-members"}, slice))
	slice.Endpoints[2].Conditions.Ready = ptr.To(false)
	require.NoError(t, k8s.Update(testContext(t), slice))
	g.holds("etcd: member member-2 does not answer")
	slice.Endpoints[2].Conditions.Ready = ptr.To(true)
	require.NoError(t, k8s.Update(testContext(t), slice))
	g.allows()

	// A client certificate from another CA, trusting that CA: the extension
	// sees every member's serving certificate as untrusted, and tells.
	foreign := newCA(t, "foreign")
	cert, key := issue(t, foreign, "healthcheck")
	require.NoError(t, k8s.Update(testContext(t), etcd.secret(cert, key, foreign.CertPEM())))
	g.holds(fmt.Sprintf("etcd: no answer from %s; no answer from %s; no answer from %s; no member answers",
		etcd.endpoint(0), etcd.endpoint(1), etcd.endpoint(2)))
	require.NoError(t, k8s.Update(testContext(t), etcd.secret(etcd.clientCert, etcd.clientKey, etcd.ca.CertPEM())))
	g.allows()
}

// createHostedControlPlane creates a HostedControlPlane as a user writes it.
func createHostedControlPlane(t testing.TB, ns, name string) *v1alpha1.HostedControlPlane {
	t.Helper()
	hcp := &v1alpha1.HostedControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.HostedControlPlaneSpec{Version: "v1.35.2"},
	}
	require.NoError(t, k8s.Create(testContext(t), hcp))
	return hcp
}

// setAvailable sets the Available condition of a HostedControlPlane, as the
// controller would once its API server answers; no reconciler runs in these
// tests (see startAdmission).
func setAvailable(t testing.TB, hcp *v1alpha1.HostedControlPlane, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	updateStatus(t, hcp, func() {
		meta.SetStatusCondition(&hcp.Status.Conditions, metav1.Condition{
			Type: v1alpha1.AvailableCondition, Status: status, Reason: reason, Message: message, ObservedGeneration: hcp.Generation,
		})
	})
}

// updateStatus changes the status of a HostedControlPlane, again on a
// conflict with another writer (Cluster API adds owner references).
func updateStatus(t testing.TB, hcp *v1alpha1.HostedControlPlane, change func()) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(testContext(t), types.NamespacedName{Namespace: hcp.Namespace, Name: hcp.Name}, hcp); err != nil {
			return err
		}
		change()
		return k8s.Status().Update(testContext(t), hcp)
	}))
}
