package contract

// EtcdRestoreSecretName is the Secret from which each etcd member of a
// control plane with spec.etcd.restore reads the snapshot it restores: its
// key and a presigned GET URL of it, and the store's CA when the backup
// Secret has one.
func EtcdRestoreSecretName(cluster string) string { return EtcdName(cluster) + "-restore" }

// The keys of the restore Secret, which the etcd-restore init container
// reads as the environment variables of the same names.
const (
	EtcdRestoreURLKey = "RESTORE_URL"
	EtcdRestoreKeyKey = "RESTORE_KEY"
	EtcdRestoreCAKey  = "RESTORE_CA"
)

// DefaultEtcdRestoreImage is the image of cmd/etcd-restore of this
// release, the init container that restores a new etcd member.
const DefaultEtcdRestoreImage = "ghcr.io/hostedcp/cluster-api-provider-hosted-etcd-restore:dev"

// EtcdRevisionBump is how far a restore moves etcd's revision beyond the
// snapshot's, marking what lies between compacted, as etcd documents for
// restoring a Kubernetes cluster: far more than a cluster writes between two
// snapshots, so that no client sees a revision go backwards.
const EtcdRevisionBump = 1_000_000_000
