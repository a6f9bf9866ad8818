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

// volumeUsage is the largest database a member reports, rounded up to a
// whole MiB.
func TestVolumeUsage(t *testing.T) {
	m := membership(3)
	assert.Nil(t, VolumeUsage(m), "no member reported a database")
	m.Members[1].DBSize = 300 << 20
	m.Members[2].DBSize = 100 << 20
	assert.Equal(t, "300Mi", VolumeUsage(m).String())
	m.Members[2].DBSize = 300<<20 + 4096
	assert.Equal(t, "301Mi", VolumeUsage(m).String(), "a few pages more")
	m.Members[2].DBSize = 301<<20 - 4096
	assert.Equal(t, "301Mi", VolumeUsage(m).String(), "a few pages more again: the same status")
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

// The volumes are the larger of the spec and what the claims ask for:
// autoGrow's growth lives on the claims, and a spec put back below a
// growth already asked for does not undo it.
func TestVolumeSizeKeepsWhatTheClaimsAskFor(t *testing.T) {
	in := input(t, v1alpha1.EtcdSpec{VolumeSize: ptr.To(resource.MustParse("2Gi"))})
	in = in.With(render.Observed{EtcdVolumeRequest: ptr.To(resource.MustParse("3Gi")), EtcdVolumeCapacity: ptr.To(resource.MustParse("3Gi"))})
	size := templateSize(statefulSet(in))
	assert.Equal(t, "3Gi", size.String())
	in = in.With(render.Observed{EtcdVolumeRequest: ptr.To(resource.MustParse("1Gi"))})
	size = templateSize(statefulSet(in))
	assert.Equal(t, "2Gi", size.String())
}

// autoGrow grows by half, rounded up to a GiB, once a member's database
// fills 80% of its quota, up to the ceiling; never while a growth or its
// quota rollout is under way, nor what would not raise the quota.
func TestAutoGrowTarget(t *testing.T) {
	quota := contract.EtcdQuota(resource.MustParse("2Gi"))
	full := quota * 81 / 100
	grown := func(etcd v1alpha1.EtcdSpec, capacity string, mutate func(*render.EtcdMembership)) string {
		m := membership(3)
		for i := range m.Members {
			m.Members[i].Quota, m.Members[i].DBSize = quota, 10<<20
		}
		if mutate != nil {
			mutate(m)
		}
		in := input(t, etcd).With(render.Observed{Etcd: m, EtcdVolumeCapacity: ptr.To(resource.MustParse(capacity))})
		next, why, ok := autoGrowTarget(in, resource.MustParse("2Gi"))
		if !ok {
			return ""
		}
		return next.String() + ": " + why
	}
	auto := v1alpha1.EtcdSpec{AutoGrow: ptr.To(true), MaxVolumeSize: ptr.To(resource.MustParse("16Gi"))}
	fills := func(m *render.EtcdMembership) { m.Members[1].DBSize = full }
	assert.Equal(t, "3Gi: member demo-etcd-1's database holds 570 MiB, 80% or more of its quota of 704 MiB", grown(auto, "2Gi", fills))
	assert.Empty(t, grown(auto, "2Gi", nil), "below the threshold")
	assert.Empty(t, grown(v1alpha1.EtcdSpec{AutoGrow: ptr.To(false), MaxVolumeSize: auto.MaxVolumeSize}, "2Gi", fills), "autoGrow off")
	assert.Empty(t, grown(v1alpha1.EtcdSpec{VolumeSize: ptr.To(resource.MustParse("2Gi"))}, "2Gi", fills), "autoGrow unset beside a volumeSize: off")
	assert.Equal(t, "3Gi: member demo-etcd-1's database holds 570 MiB, 80% or more of its quota of 704 MiB",
		grown(v1alpha1.EtcdSpec{}, "2Gi", fills), "etcd: {} grows, as the closest peer's API means it")
	assert.Empty(t, grown(auto, "1Gi", fills), "a growth under way")
	assert.Empty(t, grown(auto, "2Gi", func(m *render.EtcdMembership) {
		fills(m)
		m.Members[2].Quota = contract.EtcdQuota(resource.MustParse("1Gi"))
	}), "the quota of the growth before still rolls out")
	ceiling := auto
	ceiling.MaxVolumeSize = ptr.To(resource.MustParse("2500Mi"))
	assert.Equal(t, "2500Mi: member demo-etcd-1's database holds 570 MiB, 80% or more of its quota of 704 MiB", grown(ceiling, "2Gi", fills), "at most the ceiling")
	ceiling.MaxVolumeSize = ptr.To(resource.MustParse("2Gi"))
	assert.Empty(t, grown(ceiling, "2Gi", fills), "at the ceiling")
	override := auto
	override.Args = map[string]string{contract.EtcdQuotaFlag: "4294967296"}
	assert.Empty(t, grown(override, "2Gi", fills), "a quota of the user's does not follow the volume")
}
