package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

const mib = 1 << 20

// The quota leaves the volume room for a second copy of the database and
// for the WAL, within etcd's suggested maximum.
func TestEtcdQuota(t *testing.T) {
	for size, want := range map[string]int64{
		"100Mi": MinEtcdQuotaBytes, // too small for the rule: the floor
		"512Mi": MinEtcdQuotaBytes,
		"1Gi":   224 * mib, // (1024 - 64 - 512) / 2
		"2Gi":   704 * mib, // the default volume: (2048 - 128 - 512) / 2
		"8Gi":   3584 * mib,
		"17Gi":  7904 * mib,
		"18Gi":  MaxEtcdQuotaBytes,
		"100Gi": MaxEtcdQuotaBytes,
		"10G":   4214 * mib, // decimal units too: (9536.7 - 596.0 - 512) / 2
	} {
		volume := resource.MustParse(size)
		got := EtcdQuota(volume)
		assert.Equal(t, want, got, "%s: got %d MiB", size, got/mib)
		if got > MinEtcdQuotaBytes {
			assert.LessOrEqual(t, 2*got+512*mib+volume.Value()/16, volume.Value(), "%s: two databases and the WAL fit", size)
		}
	}
}

// Without maxVolumeSize autoGrow stops at the smallest volume of the
// largest quota: 17Gi still raises the quota, 18Gi reaches its most.
func TestEtcdMaxVolumeSizeIsWhereTheQuotaStopsGrowing(t *testing.T) {
	most := DefaultEtcdMaxVolumeSize
	assert.Equal(t, int64(MaxEtcdQuotaBytes), EtcdQuota(most))
	assert.Less(t, EtcdQuota(resource.MustParse("17Gi")), int64(MaxEtcdQuotaBytes))

	cp := &v1alpha1.HostedControlPlane{}
	assert.Equal(t, "18Gi", ptr.To(EtcdMaxVolumeSize(cp)).String())
	cp.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("20Gi"))
	assert.Equal(t, "20Gi", ptr.To(EtcdMaxVolumeSize(cp)).String(), "never below the volumes")
	cp.Spec.Etcd.MaxVolumeSize = ptr.To(resource.MustParse("40Gi"))
	assert.Equal(t, "40Gi", ptr.To(EtcdMaxVolumeSize(cp)).String(), "the spec's ceiling")
}

// autoGrow unset is on when no volume size is set, as in the closest
// peer's API, and off when one is.
func TestEtcdAutoGrowDefault(t *testing.T) {
	cp := &v1alpha1.HostedControlPlane{}
	assert.True(t, EtcdAutoGrow(cp), "etcd: {}")
	cp.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("4Gi"))
	assert.False(t, EtcdAutoGrow(cp), "etcd: {volumeSize: 4Gi}")
	cp.Spec.Etcd.AutoGrow = ptr.To(true)
	assert.True(t, EtcdAutoGrow(cp), "etcd: {volumeSize: 4Gi, autoGrow: true}")
	cp.Spec.Etcd.VolumeSize, cp.Spec.Etcd.AutoGrow = nil, ptr.To(false)
	assert.False(t, EtcdAutoGrow(cp), "etcd: {autoGrow: false}")
}
