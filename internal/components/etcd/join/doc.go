// Package join lets a new etcd member start only once a peer would let it
// join. A member that joins an existing cluster (its initial cluster state
// "existing", its data directory empty) asks its peers for the cluster
// once as it starts (GET <peer URL>/members, the first peer that answers
// decides) and exits when none answers ("cannot fetch cluster info from
// peer urls") or the answer's members are not those of its initial
// cluster; its pod then crash-loops until both hold.
//
// Reaching a peer's port is not always enough: unless it runs with
// --peer-skip-client-san-verification (our members do from the release
// that set it, see the etcd package's skipPeerSANFlag; members rendered
// before keep the check until their next rollout), etcd's peer listener
// checks the client certificate of every connection against the address
// it comes from, and when the certificate has DNS names (ours name the
// members by wildcard and the peer Service) it resolves them and closes the
// connection after the handshake unless one resolves to that address. The
// headless peer Service's name resolves to a new pod's address only once
// its EndpointSlice lists the pod and the cluster's DNS has dropped its
// cached answer (CoreDNS's kubernetes plugin gives 5 seconds), a few
// seconds after the pod's network is up: the member asked within them.
// The joining member resolves its peers' names either way.
//
// So the init container of etcd's pods (cmd/etcd-restore --wait-for-peers)
// asks here what etcd will ask, from the same pod with the same peer
// certificate and CA, on a new connection each time, until the first peer
// that answers lists exactly the members of its initial cluster, itself
// among them; then etcd starts once, and joins. A member replaced on a new
// volume can start before the controller adds it to etcd: it waits to be
// listed, and when the initial cluster it read predates that, it exits so
// that the kubelet starts it again, reading it anew (ErrStale).
//
// A member whose volume was lost (deleted, or a new one on another node)
// starts with an empty data directory while etcd still lists it as a
// voter that has run. etcd would take that voter's identity with an empty
// log, which breaks raft's safety (a voter that forgot what it accepted may
// elect a leader that lacks committed entries), and then fail in ways that
// held a replacement up for half a minute in a test. So the wait asks the
// peer that let it join which voters have run (Voters: those that
// published their client URLs; the founders of a cluster are listed with
// their names before they ever start, and one that never did joins as
// before), and when the member is one of them (LostData) it exits with
// ExitLostData instead:
// etcd never starts on it, and the controller, which reads that exit from
// the pod's status, replaces the member at once (removes it, deletes its
// pod and volume, and adds it again as a learner).
//
// Members added together (a scale from one member to three adds two
// learners at once) then start one after the other: as it starts, etcd asks
// every member for its version and whether a downgrade is under way, each
// within a timeout of seconds, and a member that is itself starting has its
// peer port open but answers nothing until its own start is done. Two that
// start together each wait out both of the other's timeouts (14 s on our
// 2-core test machine, before either could catch up), where a member whose
// etcd has not started refuses the connection at once. So a member waits
// until the members that the peer lists as not started yet (no name
// published) and whose peer URL sorts before its own serve (Before,
// WaitServing), at most 30 s.
package join
