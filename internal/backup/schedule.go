package backup

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
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
	if !strings.HasPrefix(spec, "CRON_TZ=") && !strings.HasPrefix(spec, "TZ=") {
		// The parser would take the controller's local time zone.
		spec = "CRON_TZ=UTC " + spec
	}
	c, err := cron.ParseStandard(spec)
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
