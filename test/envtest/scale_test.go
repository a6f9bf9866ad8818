package envtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// The scale subresource is how kubectl scale, autoscalers and Cluster API
// move spec.replicas, and how they read the running count.
func TestScaleSubresource(t *testing.T) {
	parallel(t)
	ctx := testContext(t)
	hcp := base(namespace(t), "scaled")
	require.NoError(t, env.Client.Create(ctx, hcp))

	scale := &autoscalingv1.Scale{}
	require.NoError(t, env.Client.SubResource("scale").Get(ctx, hcp, scale))
	assert.Equal(t, int32(2), scale.Spec.Replicas, "the default of two replicas shows through scale")

	// kubectl scale sends no resourceVersion; neither does this.
	scaleTo := func(n int32) error {
		body := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: hcp.Name, Namespace: hcp.Namespace}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
		return env.Client.SubResource("scale").Update(ctx, hcp, client.WithSubResourceBody(body))
	}
	require.NoError(t, scaleTo(5))
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(hcp), hcp))
	assert.Equal(t, ptr.To[int32](5), hcp.Spec.Replicas)

	err := scaleTo(0)
	require.Error(t, err, "scaling to zero API servers is refused")
	assert.Contains(t, err.Error(), "spec.replicas")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(hcp), hcp))
	assert.Equal(t, ptr.To[int32](5), hcp.Spec.Replicas, "the refused scale changed nothing")

	// The controller reports the running pods; scale readers see them.
	selector := "app.kubernetes.io/name=kube-apiserver,cluster.x-k8s.io/cluster-name=scaled"
	setStatus(t, hcp, func(hcp *v1alpha1.HostedControlPlane) {
		hcp.Status.Replicas = ptr.To[int32](5)
		hcp.Status.Selector = selector
	})
	require.NoError(t, env.Client.SubResource("scale").Get(ctx, hcp, scale))
	assert.Equal(t, int32(5), scale.Status.Replicas)
	assert.Equal(t, selector, scale.Status.Selector)
}
