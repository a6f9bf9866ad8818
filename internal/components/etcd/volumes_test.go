package etcd

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// While the volumes grow, the claim template asks for the new size and the
// quota stays with the smallest volume a member has; once every one has
// grown it follows, and etcd is ready only then.
func TestQuotaFollowsTheSmallestVolume(t *testing.T) {
	quotaOf := func(in render.Input) string {
		for _, arg := range statefulSet(in).Spec.Template.Spec.Containers[0].Args {
			if q, ok := strings.CutPrefix(arg, "--"+contract.EtcdQuotaFlag+"="); ok {
				return q
			}
		}
		return ""
	}
	quota := func(size string) string { return strconv.FormatInt(contract.EtcdQuota(resource.MustParse(size)), 10) }
	in := input(t, v1alpha1.EtcdSpec{VolumeSize: ptr.To(resource.MustParse("2Gi"))})
	assert.Equal(t, quota("2Gi"), quotaOf(in), "before any volume is bound")
	_, growing := volumesGrowing(in)
	assert.False(t, growing)

	in = in.With(render.Observed{EtcdVolumeCapacity: ptr.To(resource.MustParse("1Gi"))})
	assert.Equal(t, quota("1Gi"), quotaOf(in), "a member's volume still 1Gi")
	size := templateSize(statefulSet(in))
	assert.Equal(t, "2Gi", size.String(), "the claim template asks for the new size")
	out, growing := volumesGrowing(in)
	assert.True(t, growing)
	assert.Equal(t, v1alpha1.EtcdVolumesGrowingReason, out.Reason)
	assert.Equal(t, "waiting for every etcd member's volume to grow from 1Gi to 2Gi; the quota follows then", out.Message)

	in = in.With(render.Observed{EtcdVolumeCapacity: ptr.To(resource.MustParse("3Gi"))})
	assert.Equal(t, quota("2Gi"), quotaOf(in), "a volume larger than asked for (rounded up) leaves the quota to the spec")
	_, growing = volumesGrowing(in)
	assert.False(t, growing)
}

// volumeUsage is the largest database a member reports.
func TestVolumeUsage(t *testing.T) {
	m := membership(3)
	assert.Nil(t, VolumeUsage(m), "no member reported a database")
	m.Members[1].DBSize = 300 << 20
	m.Members[2].DBSize = 100 << 20
	assert.Equal(t, "300Mi", VolumeUsage(m).String())
}

// The claim template's size is read from the template named data.
func TestTemplateSize(t *testing.T) {
	sts := statefulSet(input(t, v1alpha1.EtcdSpec{VolumeSize: ptr.To(resource.MustParse("5Gi"))}))
	size := templateSize(sts)
	assert.Equal(t, "5Gi", size.String())
	sts.Spec.VolumeClaimTemplates[0].Name = "other"
	size = templateSize(sts)
	assert.True(t, size.IsZero())
}
