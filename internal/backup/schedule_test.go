package backup

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSchedule(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	daily, err := parseSchedule("0 3 * * *", "ns/a")
	require.NoError(t, err)
	require.Less(t, daily.offset, maxSpread+time.Second, "a daily schedule is spread over at most five minutes")
	first := daily.next(at("2026-01-01T10:00:00Z"))
	require.Equal(t, at("2026-01-02T03:00:00Z").Add(daily.offset), first, "in UTC, shifted by the offset")
	require.Equal(t, first.Add(24*time.Hour), daily.next(first.Add(3*time.Second)),
		"a snapshot taken at the shifted time counts for its own run")
	require.Equal(t, first, daily.next(at("2026-01-01T10:00:00Z")),
		"three missed days give one due time in the past, not three")

	berlin, err := parseSchedule("CRON_TZ=Europe/Berlin 0 3 * * *", "ns/a")
	require.NoError(t, err)
	require.Equal(t, at("2026-01-02T02:00:00Z").Add(berlin.offset), berlin.next(at("2026-01-01T10:00:00Z")),
		"a time zone the schedule names is honoured")

	offsets := map[time.Duration]bool{}
	for _, seed := range []string{"ns/a", "ns/b", "ns/c", "ns/d", "other/a", "other/b"} {
		s, err := parseSchedule("@hourly", seed)
		require.NoError(t, err)
		require.Less(t, s.offset, 6*time.Minute+time.Second, "at most a tenth of the period")
		offsets[s.offset] = true
	}
	require.Greater(t, len(offsets), 3, "control planes on the same schedule start at different times")

	every, err := parseSchedule("@every 5s", "ns/a")
	require.NoError(t, err)
	require.Zero(t, every.offset, "a period under ten seconds is not spread")

	_, err = parseSchedule("nightly", "ns/a")
	require.Error(t, err)
}
