package components

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// The rendered flag follows spec.etcd.volumeSize unless spec.etcd.args sets
// the quota, and EtcdQuotaOf, which the upgrade gates use, says the same.
func TestEtcdQuotaFlag(t *testing.T) {
	for name, tc := range map[string]struct {
		volume *resource.Quantity
		args   map[string]string
		want   string
	}{
		"default volume": {want: "738197504"},
		"8Gi":            {volume: ptr.To(resource.MustParse("8Gi")), want: "3758096384"},
		"user quota":     {volume: ptr.To(resource.MustParse("8Gi")), args: map[string]string{"quota-backend-bytes": "4294967296"}, want: "4294967296"},
	} {
		t.Run(name, func(t *testing.T) {
			in := goldenCase{cp: func(cp *v1alpha1.HostedControlPlane) {
				cp.Spec.Etcd.VolumeSize, cp.Spec.Etcd.Args = tc.volume, tc.args
			}}.input(t)
			var args []string
			for _, obj := range Etcd(in) {
				if sts, ok := obj.(*appsv1.StatefulSet); ok {
					args = sts.Spec.Template.Spec.Containers[0].Args
				}
			}
			assert.Contains(t, args, "--quota-backend-bytes="+tc.want)
			assert.Equal(t, tc.want, formatInt(contract.EtcdQuotaOf(in.ControlPlane)))
		})
	}
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }
