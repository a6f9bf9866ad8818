package envtest

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// etcd's quota follows spec.etcd.volumeSize through admission and the
// controller, and a quota in spec.etcd.args, as existing manifests set it,
// still wins.
func TestEtcdQuotaFollowsVolume(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	for name, tc := range map[string]struct {
		args map[string]string
		want string
	}{
		"derived":  {want: strconv.FormatInt(contract.EtcdQuota(resource.MustParse("8Gi")), 10)},
		"override": {args: map[string]string{"quota-backend-bytes": "4294967296"}, want: "4294967296"},
	} {
		cluster := newCluster(t, ns, name, 0)
		newControlPlane(t, cluster, func(hcp *v1alpha1.HostedControlPlane) {
			hcp.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureClusterIP}
			hcp.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: name + ".example.com", Port: 443}
			hcp.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("8Gi"))
			hcp.Spec.Etcd.Args = tc.args
		})
		etcd := get(t, &appsv1.StatefulSet{}, ns, name+"-etcd")
		assert.Contains(t, etcd.Spec.Template.Spec.Containers[0].Args, "--quota-backend-bytes="+tc.want, name)
	}
}
