package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/resource"
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
