package webhooks

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// scheduleExample is a schedule every minimum interval the platform may set
// allows: once a day.
const scheduleExample = `"0 3 * * *"`

// validateSchedule checks that a backup schedule parses, that an @every
// interval is positive (robfig/cron would run zero or less every second),
// and that the schedule runs at all.
func validateSchedule(path *field.Path, schedule string) field.ErrorList {
	s, err := contract.ParseBackupSchedule(schedule)
	if err != nil {
		return field.ErrorList{field.Invalid(path, schedule, fmt.Sprintf(
			"must be a cron schedule with five fields (for example %s) or a descriptor such as @daily: %v", scheduleExample, err))}
	}
	if every, ok := everyInterval(schedule); ok && every <= 0 {
		return field.ErrorList{field.Invalid(path, schedule, "@every needs a positive interval, such as @every 24h")}
	}
	if _, fires := contract.BackupScheduleGap(s); !fires {
		return field.ErrorList{field.Invalid(path, schedule, fmt.Sprintf(
			"never runs: no date has that day of the month in those months (such as February 30 or April 31); use days that exist, such as %s",
			scheduleExample))}
	}
	return nil
}

// everyInterval is the interval of an @every schedule as written.
func everyInterval(schedule string) (time.Duration, bool) {
	if strings.HasPrefix(schedule, "CRON_TZ=") || strings.HasPrefix(schedule, "TZ=") {
		_, schedule, _ = strings.Cut(schedule, " ")
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(schedule), "@every ")
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(rest))
	return d, err == nil
}

// ValidateBackupInterval refuses a backup schedule whose runs come closer
// than least, the platform's MIN_BACKUP_INTERVAL; zero allows every
// schedule that runs. A schedule validateSchedule refuses is left to it.
func ValidateBackupInterval(path *field.Path, s *v1alpha1.ControlPlaneSettings, least time.Duration) field.ErrorList {
	backup := s.Etcd.Backup
	if backup == nil || least <= 0 {
		return nil
	}
	parsed, err := contract.ParseBackupSchedule(backup.Schedule)
	if err != nil {
		return nil
	}
	gap, fires := contract.BackupScheduleGap(parsed)
	if !fires || gap >= least {
		return nil
	}
	return field.ErrorList{field.Invalid(path.Child("etcd", "backup", "schedule"), backup.Schedule, fmt.Sprintf(
		"runs as often as every %s, and the platform allows a snapshot of a control plane at most every %s (MIN_BACKUP_INTERVAL): "+
			"use a schedule whose runs are at least %s apart, such as %s",
		shortDuration(gap), shortDuration(least), shortDuration(least), scheduleExample))}
}

// shortDuration writes d as people do: 1h, 1h30m, 90s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
