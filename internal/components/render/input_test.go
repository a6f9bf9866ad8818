package render

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// A dual-stack Cluster is refused with a message that says so, rather than
// served with its first family alone.
func TestDualStackIsRefusedNotIgnored(t *testing.T) {
	cp := &v1alpha1.HostedControlPlane{}
	cp.Spec.Version = "v1.36.3"
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	cluster.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
	cluster.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{"192.168.0.0/16"}
	_, err := NewInput(cp, cluster, DefaultSettings())
	require.NoError(t, err)

	for name, change := range map[string]func(*clusterv1.Cluster){
		"services": func(c *clusterv1.Cluster) {
			c.Spec.ClusterNetwork.Services.CIDRBlocks = append(c.Spec.ClusterNetwork.Services.CIDRBlocks, "fd00:10:96::/112")
		},
		"pods": func(c *clusterv1.Cluster) {
			c.Spec.ClusterNetwork.Pods.CIDRBlocks = append(c.Spec.ClusterNetwork.Pods.CIDRBlocks, "fd00:10:244::/56")
		},
	} {
		dual := cluster.DeepCopy()
		change(dual)
		_, err := NewInput(cp, dual, DefaultSettings())
		assert.True(t, errors.Is(err, ErrUnsupportedNetwork), "%s: %v", name, err)
		assert.ErrorContains(t, err, "dual-stack", name)
	}
}
