package contract

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// A backup schedule is read by admission, by the extension's topology
// validation and by the backup controller, which must agree on what it
// means and on how often it runs.

// ParseBackupSchedule reads spec.etcd.backup.schedule as the backup
// controller runs it: a cron schedule with five fields or a descriptor, in
// UTC unless it starts with CRON_TZ=<zone>.
func ParseBackupSchedule(spec string) (cron.Schedule, error) {
	if !strings.HasPrefix(spec, "CRON_TZ=") && !strings.HasPrefix(spec, "TZ=") {
		// The parser would take the local time zone of the process.
		spec = "CRON_TZ=UTC " + spec
	}
	return cron.ParseStandard(spec)
}

// scheduleCycle is how far ahead BackupScheduleGap looks for the days a
// schedule runs on: 28 years hold every combination of weekday, month day
// and leap year that the Gregorian calendar has between 1901 and 2099.
const scheduleCycle = 28

// scheduleEpoch is the fixed instant BackupScheduleGap starts from, so that
// whether a schedule is accepted does not depend on the day it is checked.
var scheduleEpoch = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

// BackupScheduleGap is the shortest time between two runs of s as written,
// and whether it runs at all (false for dates that do not exist, such as
// February 30). Clock times are taken in UTC: a time zone's daylight saving
// shift, which moves one run an hour closer to the one before on one day a
// year, does not count; the backup controller keeps snapshots apart by its
// minimum itself.
//
// It takes the runs of one day, then the days the schedule runs on: the
// runs of every day it runs on are at the same clock times, so the closest
// runs are either within a day or the last of one day and the first of the
// next day it runs on.
func BackupScheduleGap(s cron.Schedule) (gap time.Duration, fires bool) {
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		// @every: robfig/cron runs it every Delay (at least a second).
		return s.Next(scheduleEpoch).Sub(scheduleEpoch), true
	}
	utc := *spec
	utc.Location = time.UTC
	first := utc.Next(scheduleEpoch.Add(-time.Second))
	if first.IsZero() {
		// robfig/cron looks five years ahead, which holds a February 29.
		return 0, false
	}
	gap = time.Duration(1<<63 - 1)
	day := dayOf(first)
	last := first
	for t := utc.Next(first); !t.IsZero() && dayOf(t).Equal(day); t = utc.Next(t) {
		gap = min(gap, t.Sub(last))
		last = t
	}
	span := last.Sub(first)
	end := scheduleEpoch.AddDate(scheduleCycle, 0, 0)
	for d := day; d.Before(end); {
		next := utc.Next(d.Add(24*time.Hour - time.Second))
		if next.IsZero() {
			break
		}
		nextDay := dayOf(next)
		gap = min(gap, nextDay.Sub(d)-span)
		if nextDay.Sub(d) == 24*time.Hour {
			break // no closer days
		}
		d = nextDay
	}
	return gap, true
}

func dayOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}
