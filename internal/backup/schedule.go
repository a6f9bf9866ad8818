package backup

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// maxSpread is the largest offset a control plane's schedule is shifted by.
const maxSpread = 5 * time.Minute

// schedule is a control plane's backup schedule, shifted by its offset.
type schedule struct {
	cron   cron.Schedule
	offset time.Duration
}

// parseSchedule reads a cron schedule, in UTC unless it names its time zone,
// and shifts it by an offset derived from seed (the control plane's
// namespace and name): up to a tenth of the schedule's period and at most
// maxSpread.
func parseSchedule(spec, seed string) (schedule, error) {
	c, err := contract.ParseBackupSchedule(spec)
	if err != nil {
		return schedule{}, fmt.Errorf("schedule %q: %w", spec, err)
	}
	// The period as seen from a fixed instant, so the offset never changes.
	first := c.Next(time.Unix(0, 0))
	window := min(maxSpread, c.Next(first).Sub(first)/10)
	h := fnv.New64a()
	_, _ = h.Write([]byte(seed))
	var offset time.Duration
	if seconds := int64(window / time.Second); seconds > 0 {
		offset = time.Duration(h.Sum64()%uint64(seconds)) * time.Second //nolint:gosec // below seconds, an int64
	}
	return schedule{cron: c, offset: offset}, nil
}

// next is when the first snapshot after since is due. Runs missed since
// then are not made up one by one: the first due time is returned, however
// far in the past, and once a snapshot is taken the next is counted from it.
func (s schedule) next(since time.Time) time.Time {
	// since may be a snapshot taken at a shifted time: count from the
	// unshifted run it belongs to.
	return s.cron.Next(since.Add(-s.offset)).Add(s.offset)
}

// backupDeferredReason is the reason of the event that tells when a
// snapshot asked for too soon after the last is taken.
const backupDeferredReason = "BackupDeferred"

// earliest is when the next snapshot of hcp may start: MinInterval after the
// second in which the last began (the status keeps seconds); the zero time
// before the first.
func (r *Reconciler) earliest(hcp *v1alpha1.HostedControlPlane) time.Time {
	last := hcp.Status.Etcd.LastBackupTime
	if last == nil {
		return time.Time{}
	}
	return last.Add(r.opts.MinInterval)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
