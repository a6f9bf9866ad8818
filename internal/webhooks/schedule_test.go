package webhooks

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// withSchedule is a valid control plane backed up on schedule.
func withSchedule(schedule string) *v1alpha1.HostedControlPlane {
	hcp := valid()
	hcp.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: schedule, Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}
	return hcp
}

// The schedules a greedy tenant would write are refused, with the field and
// what is allowed; every common schedule at least an hour apart passes (23:00
// and 00:00 are an hour apart, the minimum).
func TestBackupSchedules(t *testing.T) {
	hourly := HostedControlPlane{MinBackupInterval: time.Hour}
	for _, schedule := range []string{
		"@hourly", "@daily", "@weekly", "@every 1h", "@every 6h", "0 */2 * * *", "0 3 * * *", "30 1,13 * * *",
		"0 0 29 2 *", "0 0,23 * * *", "CRON_TZ=Europe/Berlin 0 3 * * *", "CRON_TZ=America/New_York 0 * * * *", "0 0 1 1 *",
	} {
		_, err := hourly.ValidateCreate(context.Background(), withSchedule(schedule))
		assert.NoError(t, err, schedule)
	}
	for schedule, want := range map[string]string{
		"@every 1s": `spec.etcd.backup.schedule: Invalid value: "@every 1s": runs as often as every 1s, and the platform allows a snapshot ` +
			`of a control plane at most every 1h (MIN_BACKUP_INTERVAL): use a schedule whose runs are at least 1h apart, such as "0 3 * * *"`,
		"@every 59m":   `runs as often as every 59m, and the platform allows a snapshot of a control plane at most every 1h`,
		"*/30 * * * *": `runs as often as every 30m`,
		"* * * * *":    `runs as often as every 1m`,
		// 23:30, then 00:15 the next day.
		"15,30 0,23 * * *":      `runs as often as every 15m`,
		"@every 0s":             `spec.etcd.backup.schedule: Invalid value: "@every 0s": @every needs a positive interval, such as @every 24h`,
		"@every -1h":            `@every needs a positive interval`,
		"CRON_TZ=UTC @every 0s": `@every needs a positive interval`,
		"0 3 31 2 *":            `spec.etcd.backup.schedule: Invalid value: "0 3 31 2 *": never runs: no date has that day of the month in those months (such as February 30 or April 31); use days that exist, such as "0 3 * * *"`,
		"0 0 30 2 *":            `never runs`,
		"CRON_TZ=Europe/Berlin 0 0 31 4,6,9,11 *": `never runs`,
		"every night":                    `must be a cron schedule with five fields`,
		"CRON_TZ=Mars/Olympus 0 3 * * *": `must be a cron schedule with five fields`,
	} {
		_, err := hourly.ValidateCreate(context.Background(), withSchedule(schedule))
		require.Error(t, err, schedule)
		assert.Contains(t, err.Error(), want, schedule)
	}

	// Without a minimum (a zero setting), only what never runs or runs
	// every non-positive interval is refused.
	_, err := HostedControlPlane{}.ValidateCreate(context.Background(), withSchedule("@every 1s"))
	require.NoError(t, err)
	_, err = HostedControlPlane{}.ValidateCreate(context.Background(), withSchedule("@every 0s"))
	require.ErrorContains(t, err, "@every needs a positive interval")

	// A template is held to the same, at its own path.
	tmpl := &v1alpha1.HostedControlPlaneTemplate{}
	tmpl.Spec.Template.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "*/5 * * * *", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}
	_, err = HostedControlPlaneTemplate{MinBackupInterval: time.Hour}.ValidateCreate(context.Background(), tmpl)
	require.ErrorContains(t, err, `spec.template.spec.etcd.backup.schedule: Invalid value: "*/5 * * * *": runs as often as every 5m`)
}

// A control plane stored with a schedule from before the minimum (or before
// a platform raised it) is not refused an unrelated change, but a new
// schedule must keep the minimum.
func TestBackupScheduleRuleRefusesNewInputOnly(t *testing.T) {
	hourly := HostedControlPlane{MinBackupInterval: time.Hour}
	for _, stored := range []string{"@every 1s", "@every 0s", "0 3 31 2 *"} {
		old := withSchedule(stored)
		scaled := old.DeepCopy()
		scaled.Finalizers = []string{"example.com/finalizer"}
		_, err := hourly.ValidateUpdate(context.Background(), old, scaled)
		require.NoError(t, err, stored)

		changed := old.DeepCopy()
		changed.Spec.Etcd.Backup.Schedule = "@every 2s"
		_, err = hourly.ValidateUpdate(context.Background(), old, changed)
		require.ErrorContains(t, err, `spec.etcd.backup.schedule: Invalid value: "@every 2s": runs as often as every 2s`, stored)
	}
}
