package contract

import (
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// The etcd quota is rendered into the members' flags and judged by the
// upgrade gates of the extension, which must not disagree on it.

// DefaultEtcdVolumeSize is each member's volume unless the spec sets one.
var DefaultEtcdVolumeSize = resource.MustParse("2Gi")

// EtcdVolumeSize is the size of each etcd member's volume.
func EtcdVolumeSize(cp *v1alpha1.HostedControlPlane) resource.Quantity {
	return ptr.Deref(cp.Spec.Etcd.VolumeSize, DefaultEtcdVolumeSize)
}

// DefaultEtcdMaxVolumeSize is the most autoGrow grows a volume to when
// spec.etcd.maxVolumeSize is unset: the smallest volume whose quota is
// MaxEtcdQuotaBytes (17.6Gi, rounded up to a whole GiB). A larger volume
// would raise the quota no further, so growing beyond it only costs
// storage.
var DefaultEtcdMaxVolumeSize = resource.MustParse("18Gi")

// EtcdAutoGrow is whether the controller grows the etcd volumes as etcd
// fills them: spec.etcd.autoGrow, or, when unset, whether volumeSize is
// unset too. A control plane that names no size is one whose size is left
// to the controller, as manifests of the closest peer's API mean it.
func EtcdAutoGrow(cp *v1alpha1.HostedControlPlane) bool {
	return ptr.Deref(cp.Spec.Etcd.AutoGrow, cp.Spec.Etcd.VolumeSize == nil)
}

// EtcdMaxVolumeSize is the most autoGrow grows each volume to:
// spec.etcd.maxVolumeSize, or DefaultEtcdMaxVolumeSize but at least the
// volumes' own size.
func EtcdMaxVolumeSize(cp *v1alpha1.HostedControlPlane) resource.Quantity {
	if most := cp.Spec.Etcd.MaxVolumeSize; most != nil {
		return *most
	}
	if size := EtcdVolumeSize(cp); size.Cmp(DefaultEtcdMaxVolumeSize) > 0 {
		return size
	}
	return DefaultEtcdMaxVolumeSize
}

// The bounds of EtcdQuota.
const (
	// MaxEtcdQuotaBytes is etcd's suggested maximum database size, above
	// which it warns at start: a bigger database makes every
	// defragmentation, snapshot and catch-up of a member slower.
	MaxEtcdQuotaBytes = 8 << 30
	// MinEtcdQuotaBytes is about what the objects of a small cluster and the
	// eight hours of their history that etcd keeps (auto-compaction) take.
	// Less would hold the control plane read-only from the start; a volume
	// that leaves less than this is too small for etcd.
	MinEtcdQuotaBytes = 128 << 20
	// etcdLogHeadroom is the room the write-ahead log and raft snapshots take
	// beside the database: etcd keeps five WAL segments of 64MB (--max-wals),
	// writes a sixth and preallocates a seventh, about 430MiB, and a few
	// small snapshot files.
	etcdLogHeadroom = 512 << 20
	// EtcdQuotaFlag is the etcd flag that sets the quota, which the
	// renderer sets and spec.etcd.args may override.
	EtcdQuotaFlag = "quota-backend-bytes"
)

// EtcdQuota is the backend quota (--quota-backend-bytes) of an etcd member
// whose volume holds volumeSize bytes. At its quota etcd raises the NOSPACE
// alarm and refuses writes, a state that compaction and defragmentation
// undo; a full volume instead fails its writes to the WAL and stops the
// member. So the quota must come first, with room left on the volume for:
//
//   - the filesystem's own metadata (ext4's inode tables and journal take a
//     few percent): one sixteenth of the volume;
//   - the WAL and snapshot files: 512MiB;
//   - a second copy of the database: defragmentation writes the compacted
//     database beside the old one before replacing it, and a member that
//     falls behind receives the leader's whole database the same way.
//
// That is quota = (volume - volume/16 - 512MiB) / 2, in whole MiB, at most
// MaxEtcdQuotaBytes (reached from about 18Gi) and at least
// MinEtcdQuotaBytes (below about 800Mi, where the volume is too small to
// keep these promises). The default 2Gi volume gets 704MiB; the upgrade
// gates hold an upgrade from 80% of it.
func EtcdQuota(volumeSize resource.Quantity) int64 {
	volume := volumeSize.Value()
	quota := (volume - volume/16 - etcdLogHeadroom) / 2
	quota &^= 1<<20 - 1
	return min(max(quota, MinEtcdQuotaBytes), MaxEtcdQuotaBytes)
}

// EtcdQuotaOf is the backend quota the etcd members of cp run with:
// spec.etcd.args' quota-backend-bytes when it is a number of bytes, or else
// EtcdQuota of their volume.
func EtcdQuotaOf(cp *v1alpha1.HostedControlPlane) int64 {
	if arg, ok := cp.Spec.Etcd.Args[EtcdQuotaFlag]; ok {
		if n, err := strconv.ParseInt(arg, 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return EtcdQuota(EtcdVolumeSize(cp))
}
