package contract

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBackupScheduleGap(t *testing.T) {
	const day = 24 * time.Hour
	for spec, want := range map[string]time.Duration{
		"@every 1s":      time.Second,
		"@every 0s":      time.Second, // robfig/cron runs it every second
		"@every -1h":     time.Second,
		"@every 90m":     90 * time.Minute,
		"* * * * *":      time.Minute,
		"*/15 * * * *":   15 * time.Minute,
		"@hourly":        time.Hour,
		"0 */6 * * *":    6 * time.Hour,
		"0 3 * * *":      day,
		"@daily":         day,
		"0 0,23 * * *":   time.Hour, // 23:00, then 00:00 the next day
		"0 1,23 * * 1":   22 * time.Hour,
		"0 1,23 * * 1,2": 2 * time.Hour, // Monday 23:00, Tuesday 01:00
		"0 0,12 * * 1":   12 * time.Hour,
		"0 3 * * 0":      7 * day,
		"0 0 1 * *":      28 * day, // February
		"0 0 1,31 * *":   day,      // the 31st, then the 1st
		"0 0 1 1 *":      365 * day,
		"0 0 29 2 *":     (4*365 + 1) * day, // leap years only: 2024, then 2028
		// Day of month and day of week both set: either day (cron's rule).
		"0 22 13 * 5":                           day, // a Thursday the 13th, then Friday
		"CRON_TZ=Europe/Berlin 0 3 * * *":       day, // as written, daylight saving aside
		"CRON_TZ=America/New_York */30 * * * *": 30 * time.Minute,
	} {
		s, err := ParseBackupSchedule(spec)
		require.NoError(t, err, spec)
		gap, fires := BackupScheduleGap(s)
		assert.True(t, fires, spec)
		assert.Equal(t, want, gap, spec)
	}
	for _, spec := range []string{"0 3 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *", "CRON_TZ=Europe/Berlin 0 0 30 2 *"} {
		s, err := ParseBackupSchedule(spec)
		require.NoError(t, err, spec)
		_, fires := BackupScheduleGap(s)
		assert.False(t, fires, "%s never runs", spec)
	}
}

// The controller reads a schedule in UTC unless it names its zone, never in
// the zone of the process.
func TestParseBackupScheduleInUTC(t *testing.T) {
	at := time.Date(2026, time.March, 1, 10, 0, 0, 0, time.UTC)
	s, err := ParseBackupSchedule("0 3 * * *")
	require.NoError(t, err)
	assert.Equal(t, time.Date(2026, time.March, 2, 3, 0, 0, 0, time.UTC), s.Next(at).UTC())
	s, err = ParseBackupSchedule("CRON_TZ=Europe/Berlin 0 3 * * *")
	require.NoError(t, err)
	assert.Equal(t, time.Date(2026, time.March, 2, 2, 0, 0, 0, time.UTC), s.Next(at).UTC())
}
