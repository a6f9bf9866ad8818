package contract

import (
	"regexp"
	"strconv"
)

// EtcdRestoreSecretName is the Secret from which each etcd member of a
// control plane with spec.etcd.restore reads the snapshot it restores: its
// key and a presigned GET URL of it, and the store's CA when the backup
// Secret has one.
func EtcdRestoreSecretName(cluster string) string { return EtcdName(cluster) + "-restore" }

// The keys of the restore Secret, which the etcd-restore init container
// reads as the environment variables of the same names. RESTORE_ID names a
// restore in place (status.etcd.restoring's id); a restore at creation has
// none.
const (
	EtcdRestoreURLKey = "RESTORE_URL"
	EtcdRestoreKeyKey = "RESTORE_KEY"
	EtcdRestoreCAKey  = "RESTORE_CA"
	EtcdRestoreIDKey  = "RESTORE_ID"
)

// EtcdRestoreIDAnnotation on the etcd members' pod template names the
// restore in place they were started for, so that the pods from before it
// are told apart.
const EtcdRestoreIDAnnotation = "controlplane.cluster.x-k8s.io/etcd-restore-id"

// DefaultEtcdRestoreImage is the image of cmd/etcd-restore of this
// release, the init container that restores a new etcd member.
const DefaultEtcdRestoreImage = "ghcr.io/hostedcp/cluster-api-provider-hosted-etcd-restore:dev"

// EtcdRevisionBump is how far a restore moves etcd's revision beyond the
// snapshot's, marking what lies between compacted, as etcd documents for
// restoring a Kubernetes cluster: far more than a cluster writes between two
// snapshots, so that no client sees a revision go backwards.
const EtcdRevisionBump = 1_000_000_000

// snapshotRevision is the revision in a snapshot's key.
var snapshotRevision = regexp.MustCompile(`-rev(\d+)\.db$`)

// EtcdSnapshotRevision is the etcd revision a snapshot's object key names
// (package backup names them <time>-rev<revision>.db); zero when it names
// none.
func EtcdSnapshotRevision(key string) int64 {
	if m := snapshotRevision.FindStringSubmatch(key); m != nil {
		revision, _ := strconv.ParseInt(m[1], 10, 64)
		return revision
	}
	return 0
}
