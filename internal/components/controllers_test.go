package components

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// Unset, the controller managers and schedulers are two, but one beside a
// single API server; a replicas the user sets is kept whatever the API
// servers.
func TestControllerReplicasFollowTheAPIServers(t *testing.T) {
	for _, c := range []struct {
		apiServers  *int32
		controllers *int32
		want        int32
	}{
		{apiServers: nil, want: 2},
		{apiServers: ptr.To[int32](1), want: 1},
		{apiServers: ptr.To[int32](2), want: 2},
		{apiServers: ptr.To[int32](3), want: 2},
		{apiServers: ptr.To[int32](1), controllers: ptr.To[int32](3), want: 3},
		{apiServers: ptr.To[int32](3), controllers: ptr.To[int32](1), want: 1},
	} {
		name := fmt.Sprintf("%v API servers, %v set", ptr.Deref(c.apiServers, -1), ptr.Deref(c.controllers, -1))
		in := goldenCase{cp: func(cp *v1alpha1.HostedControlPlane) {
			cp.Spec.Replicas = c.apiServers
			cp.Spec.Deployment.ControllerManager.Replicas = c.controllers
			cp.Spec.Deployment.Scheduler.Replicas = c.controllers
		}}.input(t)
		for _, component := range []Component{ControllerManager{}, Scheduler{}} {
			objs, err := component.Render(in)
			require.NoError(t, err)
			var replicas []int32
			for _, obj := range objs {
				if d, ok := obj.(*appsv1.Deployment); ok {
					replicas = append(replicas, ptr.Deref(d.Spec.Replicas, 1))
				}
			}
			assert.Equal(t, []int32{c.want}, replicas, "%s: %T", name, component)
		}
	}
}
