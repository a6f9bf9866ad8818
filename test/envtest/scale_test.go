package envtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The scale subresource is how kubectl scale, autoscalers and Cluster API
// move spec.replicas, and how they read the running count.
func TestScaleSubresource(t *testing.T) {
	ctx := testContext(t)
	hcp := base(namespace(t), "scaled")
	require.NoError(t, env.Client.Create(ctx, hcp))

	scale := &autoscalingv1.Scale{}
	require.NoError(t, env.Client.SubResource("scale").Get(ctx, hcp, scale))
	assert.Equal(t, int32(2), scale.Spec.Replicas, "the default of two replicas shows through scale")

	scale.Spec.Replicas = 5
	require.NoError(t, env.Client.SubResource("scale").Update(ctx, hcp, client.WithSubResourceBody(scale)))
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(hcp), hcp))
	assert.Equal(t, ptr.To[int32](5), hcp.Spec.Replicas)

	scale.Spec.Replicas = 0
	err := env.Client.SubResource("scale").Update(ctx, hcp, client.WithSubResourceBody(scale))
	require.Error(t, err, "scaling to zero API servers is refused")
	assert.Contains(t, err.Error(), "spec.replicas")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(hcp), hcp))
	assert.Equal(t, ptr.To[int32](5), hcp.Spec.Replicas, "the refused scale changed nothing")

	// The controller reports the running pods; scale readers see them.
	hcp.Status.Replicas = ptr.To[int32](5)
	hcp.Status.Selector = "app.kubernetes.io/name=kube-apiserver,cluster.x-k8s.io/cluster-name=scaled"
	require.NoError(t, env.Client.Status().Update(ctx, hcp))
	require.NoError(t, env.Client.SubResource("scale").Get(ctx, hcp, scale))
	assert.Equal(t, int32(5), scale.Status.Replicas)
	assert.Equal(t, hcp.Status.Selector, scale.Status.Selector)
}
