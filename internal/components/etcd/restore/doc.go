// Package restore is what the etcd-restore init container
// (cmd/etcd-restore) does in each etcd member's pod of a control plane with
// spec.etcd.restore: it initialises the member's data directory from the
// snapshot the controller chose, before etcd starts.
//
// A member restores only when it founds a new cluster
// (ETCD_INITIAL_CLUSTER_STATE new): at creation on an empty data
// directory, and for a restore in place (RESTORE_ID names it) whatever its
// data directory holds, unless the file restore-id beside the data
// directory says it was restored for that restore already, as a member
// that restarts before the restore ends finds. A member that joins later,
// or replaces a failed one, starts empty and syncs from its peers; a
// member with data keeps it (Skip).
//
// The snapshot streams from a presigned GET URL to a file on the member's
// volume, never held in memory, its sha256 checked as it passes (package
// snapshotcheck), and is restored with etcdutl's library
// (go.etcd.io/etcd/etcdutl/v3/snapshot) with its sha256 check on, under
// the member's name, peer URL, initial cluster and token as etcd's own
// flags give them, every member from the same object, so that they form
// one cluster. The revision is bumped by contract.EtcdRevisionBump and
// marked compacted, so that watchers and informers never see it go
// backwards. The data a member held is deleted only once the snapshot is
// downloaded and checked. It restores into a temporary directory and
// renames that onto the data directory only when it is complete: a member
// that crashes mid-restore leaves nothing etcd would take for data, and
// starts again.
package restore
