// Command etcd-restore is the init container of each etcd member of a
// control plane with spec.etcd.restore: it restores the member's data
// directory from the snapshot the controller chose, before etcd starts, or
// says why it does nothing (see package restore).
//
// With --wait-for-peers (and etcd's --name and --data-dir) it is the init
// container of every etcd member instead: a member that joins an existing
// cluster with an empty data directory starts only once a peer's peer port
// accepts a connection from its pod, within five minutes (see package
// join), so that it joins on its first start.
//
// Its flags are etcd's own, with the values the etcd container is given;
// the initial cluster and its state come from etcd's environment variables,
// the snapshot from the restore Secret's.
package main
