// Command etcd-restore is the init container of each etcd member of a
// control plane with spec.etcd.restore: it restores the member's data
// directory from the snapshot the controller chose, before etcd starts, or
// says why it does nothing (see package restore).
//
// With --wait-for-peers (and etcd's --name, --data-dir,
// --initial-advertise-peer-urls and peer certificate files) it is the init
// container of every etcd member instead: a member that joins an existing
// cluster with an empty data directory starts only once a peer answers
// etcd's own request for the cluster (GET /members over the peer TLS, from
// the member's pod, with its certificate) listing exactly the members the
// member read, itself among them, within five minutes (see package join),
// so that it joins on its first start; and one that etcd lists as a voter
// that has run, which lost its data, never starts etcd: it exits with
// join.ExitLostData for the controller to replace it.
//
// Its flags are etcd's own, with the values the etcd container is given;
// the initial cluster and its state come from etcd's environment variables,
// the snapshot from the restore Secret's.
package main
