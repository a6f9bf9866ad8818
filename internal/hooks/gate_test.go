package hooks

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

func TestRetryAfterSetting(t *testing.T) {
	for settings, want := range map[string]int32{"": DefaultRetryAfterSeconds, "1": 1, "600": 600} {
		s := map[string]string{}
		if settings != "" {
			s[RetryAfterSetting] = settings
		}
		got, err := retryAfter(s)
		assert.NoError(t, err)
		assert.Equal(t, want, got)
	}
	for _, bad := range []string{"0", "601", "10s", "-5"} {
		_, err := retryAfter(map[string]string{RetryAfterSetting: bad})
		assert.EqualError(t, err, `ExtensionConfig setting retryAfterSeconds "`+bad+`": use a whole number of seconds from 1 to 600`)
	}
}

// A bad setting fails the hook with the setting's name: waiting cannot fix it.
func TestGateFailsOnABadSetting(t *testing.T) {
	resp := &runtimehooksv1.BeforeClusterUpgradeResponse{}
	(&Handlers{}).BeforeClusterUpgrade(context.Background(), &runtimehooksv1.BeforeClusterUpgradeRequest{
		CommonRequest: runtimehooksv1.CommonRequest{Settings: map[string]string{RetryAfterSetting: "soon"}},
	}, resp)
	assert.Equal(t, runtimehooksv1.ResponseStatusFailure, resp.Status)
	assert.Contains(t, resp.Message, "retryAfterSeconds")
}

// Control planes of other providers are not this extension's to judge: the
// gates let their upgrades through without reading anything (the Handlers
// here have no clients at all).
func TestGatesLetOtherControlPlanesThrough(t *testing.T) {
	cluster := clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kubeadm"},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "kubeadm",
		}},
	}
	h := &Handlers{}
	up := &runtimehooksv1.BeforeClusterUpgradeResponse{}
	h.BeforeClusterUpgrade(context.Background(), &runtimehooksv1.BeforeClusterUpgradeRequest{Cluster: cluster, ToKubernetesVersion: "v1.36.3"}, up)
	cp := &runtimehooksv1.BeforeControlPlaneUpgradeResponse{}
	h.BeforeControlPlaneUpgrade(context.Background(), &runtimehooksv1.BeforeControlPlaneUpgradeRequest{Cluster: cluster, ToKubernetesVersion: "v1.36.3"}, cp)
	for _, resp := range []runtimehooksv1.RetryResponseObject{up, cp} {
		assert.Equal(t, runtimehooksv1.ResponseStatusSuccess, resp.GetStatus())
		assert.Zero(t, resp.GetRetryAfterSeconds())
	}
}

// Every hook the extension serves is in the catalog, under its own name.
func TestExtensionHandlersAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, h := range (&Handlers{}).ExtensionHandlers() {
		assert.False(t, seen[h.Name], h.Name)
		seen[h.Name] = true
		assert.Equal(t, int32(timeoutSeconds), *h.TimeoutSeconds)
	}
	assert.Len(t, seen, 6)
}
