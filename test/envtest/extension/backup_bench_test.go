package extension

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/backup"
)

// BenchmarkBackup snapshots a real etcd of about 64 MiB (the test etcd's
// quota is 100 MB) into a real versitygw, on demand, through the backup
// controller running in this process, and prints its throughput (from the
// controller's own duration metric, so the test's polling does not count)
// and how much the process's resident memory grew while it ran.
// Run with -benchtime 1x (`make bench`).
func BenchmarkBackup(b *testing.B) {
	ctx := testContext(b)
	ns := namespace(b)
	db := startEtcd(b, "bench", ns)
	db.publish()
	s3 := startS3(b)
	require.NoError(b, s3.client.MakeBucket(ctx, testBucket, minio.MakeBucketOptions{}))
	require.NoError(b, k8s.Create(ctx, s3.backupSecret(ns, testBucket)))
	writeLargeValues(b, db, 64)
	// As cmd/controller runs it (16 MiB parts), asked again within a second,
	// so without its minimum interval between snapshots.
	opts := backup.DefaultOptions()
	opts.RetryInterval, opts.MinInterval = time.Second, 0
	startBackups(b, ns, opts)
	hcp := backedUpControlPlane(b, ns, "bench", "bench", v1alpha1.EtcdBackup{
		Schedule: "0 0 1 1 *", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"},
	})
	key := client.ObjectKeyFromObject(hcp)
	idle := rssBytes()
	var peak atomic.Int64
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				if rss := rssBytes(); rss > peak.Load() {
					peak.Store(rss)
				}
			}
		}
	}()
	sum0, n0 := durations(b)
	var bytesStored int64
	for b.Loop() {
		require.NoError(b, k8s.Get(ctx, key, hcp))
		last := hcp.Status.Etcd.LastBackupKey
		askForSnapshot(b, key)
		waitBackedUp(b, key, last, "the snapshot asked for")
		require.NoError(b, k8s.Get(ctx, key, hcp))
		bytesStored += hcp.Status.Etcd.LastBackupSize.Value()
	}
	close(stop)
	sum, n := durations(b)
	require.Equal(b, n0+uint64(b.N), n, "one stored snapshot per iteration")
	mib := float64(bytesStored) / (1 << 20)
	for _, line := range []string{
		fmt.Sprintf("BENCH backup_db_mib %.1f MiB", mib/float64(b.N)),
		fmt.Sprintf("BENCH backup_mib_per_s %.1f MiB/s", mib/(sum-sum0)),
		fmt.Sprintf("BENCH backup_controller_rss_delta_mib %.1f MiB", float64(max(peak.Load()-idle, 0))/(1<<20)),
	} {
		fmt.Println(line)
		b.Log(line)
	}
}

// durations is the sum and count of the controller's snapshot durations.
func durations(b *testing.B) (float64, uint64) {
	b.Helper()
	families, err := crmetrics.Registry.Gather()
	require.NoError(b, err)
	for _, f := range families {
		if f.GetName() == "hostedcp_etcd_backup_duration_seconds" {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleSum(), h.GetSampleCount()
		}
	}
	return 0, 0
}

// rssBytes is this process's resident memory; 0 when Linux does not say.
func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if fields := bytes.Fields(data); err == nil && len(fields) > 1 {
		if pages, err := strconv.ParseInt(string(fields[1]), 10, 64); err == nil {
			return pages * int64(os.Getpagesize())
		}
	}
	return 0
}
