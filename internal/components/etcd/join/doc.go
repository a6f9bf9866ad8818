// Package join lets a new etcd member start only once it reaches a peer.
// A member that joins an existing cluster (its initial cluster state
// "existing", its data directory empty) asks its peers for the cluster once
// as it starts, and exits when none answers ("cannot fetch cluster info
// from peer urls"); its pod then crash-loops until the network admits it,
// as a network policy engine does a few seconds after a pod starts. The
// init container of etcd's pods (cmd/etcd-restore --wait-for-peers) waits
// here until a peer's peer port accepts a connection from the pod, so that
// etcd starts once, and joins.
package join
