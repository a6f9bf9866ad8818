// Package backup takes the etcd snapshots spec.etcd.backup asks for and
// stores them in S3-compatible storage: on the cron schedule, when the
// backup-now annotation asks, and once more before the control plane is
// deleted. It also prepares the restore spec.etcd.restore asks for (see
// Restore below).
//
// Where the work runs: in the controller, which streams a snapshot from one
// etcd member straight into an S3 multipart upload. A Job per backup was the
// alternative; it would need an image with an S3 client, the etcd client
// certificate and the S3 credentials mounted into a pod, scheduling
// latency, and a second channel to report back what was stored, to move work
// that is almost entirely waiting on two network connections. In the
// controller a snapshot costs one goroutine and one upload buffer (PartSize,
// 16 MiB by default) whatever the database size, reuses the etcd clients the
// health checks keep (etcd.Checker), and its outcome lands in the status in
// the same pass.
//
// Load stays bounded as the number of control planes grows: a controller of
// its own, apart from the control plane reconciler, takes snapshots with at
// most MaxConcurrent of them (2 by default, MAX_CONCURRENT_BACKUPS) running
// at once. Each control plane's schedule is shifted by a fixed offset
// derived from its name, up to a tenth of the schedule's period and at most
// five minutes, so many control planes on the same schedule do not all
// start in the same second. Snapshots come from a follower when one
// applied the newest revision any member reports, so the leader keeps
// serving writes and the snapshot holds every write acknowledged before it
// began; from the leader otherwise.
//
// # Fairness
//
// Tenants share the snapshot slots, so no tenant may keep them all. Two
// rules see to it. A control plane's snapshots start at least MinInterval
// apart (MIN_BACKUP_INTERVAL, 1h by default): admission refuses schedules
// that run more often, and this controller holds every snapshot but the
// final one to it, which covers schedules stored before the rule and the
// backup-now annotation (a request that comes too soon is deferred, not
// refused: it is taken once the interval has passed). And the slots go to
// namespaces in turn (slots): a tenant with fifty control planes due at
// once delays another tenant's snapshot by at most one of its own.
//
// The slots are not controller-runtime's workers. With one worker per slot,
// as before, the workqueue decides the order: a tenant whose fifty control
// planes were queued first is served first, and every other pass (due
// times, restores) waits behind snapshots. Blocking a worker until its turn
// comes only moves the problem, since the control planes still queued behind
// the blocked workers never reach the turns. So a pass that finds no slot
// for it queues its control plane in the slots and ends at once; when a
// slot frees, it is kept for the next control plane in turn and a channel
// source brings that control plane's pass back to take it. The controller
// runs quickWorkers more workers than slots for the passes that take no
// snapshot. A slot kept for a control plane that no longer wants one goes
// to the next after grantTimeout, and a waiting pass comes back after
// RetryInterval in any case, so a lost wake-up delays, never strands.
//
// A snapshot counts as taken only once it is stored and verified: the
// stream must end in the sha256 of the database (package snapshotcheck, the
// check etcdutl makes before a restore), the upload must complete, and the
// stored object must have the size that was streamed. A stream that breaks
// or fails the check aborts the multipart upload, so no object is left that
// could be mistaken for a snapshot; an upload the server never hears the
// end of stays an incomplete multipart upload, which lists no object.
//
// Objects are named <prefix><namespace>/<cluster>/<UTC time>-rev<revision>.db,
// so they sort by time within a cluster; the revision is the member's when
// the snapshot began (the snapshot holds at least it). After each snapshot
// the retentionCount newest objects of that name pattern under the
// cluster's own folder are kept and older ones deleted.
//
// Schedules are in UTC unless they start with CRON_TZ=<zone>. When runs
// were missed (the controller was down), one snapshot is taken at once, not
// one per missed run. A snapshot that fails is retried every RetryInterval
// until one succeeds; BackupReady says what failed, and a Warning event
// tells of each new failure. The Available condition never depends on
// backups.
//
// # Restore
//
// Restores belong to the control plane reconciler (internal/controller): it
// alone writes EtcdRestored and status.etcd.restoring and restoredFrom, and
// this controller takes no snapshot while a restore is pending or under
// way. What it needs of this package is Restorer, a service that finds
// the snapshot and hands it to the members, and records nothing in the
// control plane. (Both controllers once wrote those fields, each at its own
// steps, and three bugs sat at that hand-off.)
//
// Before etcd first starts from spec.etcd.restore, or for a restore in
// place, Restorer.Prepare resolves the snapshot to one key, once per
// restore, so that every member restores the same object: "latest" is the
// newest snapshot of the folder (fromCluster's, the control plane's own
// Cluster's by default, and always its own for a restore in place), a key
// must exist in a folder the control plane may read. It writes the key, a
// presigned GET URL of it (RestoreURLExpiry, renewed once half of it
// passed) and the store's CA into the Secret <cluster>-etcd-restore, owned
// by the control plane, with the restore ID of a restore in place among its
// keys. The members read it in their init container (package etcd/restore),
// so their pods need no S3 credentials and the backup Secret may be in
// another namespace; until it exists no member starts, so etcd never starts
// empty. Restorer.Restored tells once etcd answered (the members ConfigMap
// of this control plane records its members as existing) which snapshot
// spec.etcd.restore restored.
//
// The store sits behind a small interface (objects), so what this package
// decides about snapshots (which one, which may be read, which retention
// deletes) is unit-tested without a server, and the S3 client against a
// real one in test/envtest/extension.
package backup
