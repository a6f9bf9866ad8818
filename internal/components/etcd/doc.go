// Package etcd is everything about a hosted control plane's etcd, in one
// room: the Component that renders its members (a StatefulSet with
// persistent volumes and the backend quota derived from their size), its
// headless and client Services, disruption budget and network policy, and
// the ConfigMap that records its membership; the certificates it serves and
// connects with, and their names; the image tags kubeadm pairs with each
// Kubernetes minor; the preflight that guards a running etcd and changes its
// membership; the rule by which it is ready; what the status reports of it
// (Members, MemberStatuses, VolumeSize, VolumeUsage); the growth of its
// volumes; and the health check the extension's upgrade gates run.
//
// The controller and the extension reach etcd through one Checker, which
// keeps a client per member endpoint and cluster and reuses it across
// passes and hook calls while the credentials stay the same (the
// health-check client certificate the controller keeps in a Secret), bounds
// every call by a timeout, and closes a cluster's clients when its control
// plane is deleted (Forget). Servers' certificates are verified against the
// client Service's DNS name. The extension finds the members through the
// EndpointSlices of that Service (TargetFor); the controller dials every
// etcd pod by its address, ready or not (PodsTarget), since a learner that
// catches up is not ready.
//
// The same clients stream snapshots (Checker.Snapshot) from a member that
// answers, a follower when there is one; package snapshotcheck checks such
// a stream's trailing sha256 as it passes, the way etcdutl checks a
// snapshot before restoring it.
//
// # Health
//
// etcd is healthy, as an operator would check before touching it, when every
// member answers, a leader exists and no alarm is raised; the upgrade gates
// also hold a database close to its quota. The controller observes it once
// per pass (Membership): the members etcd lists, by the pod each runs in
// (known from its peer URL, so a member added but not started has a name
// too), voter or learner, healthy or not, and the problems of the cluster.
//
// # Membership in place
//
// A member's --initial-cluster and --initial-cluster-state come from the
// ConfigMap <cluster>-etcd-members, through the environment variables
// ETCD_INITIAL_CLUSTER and ETCD_INITIAL_CLUSTER_STATE (etcd reads each flag
// from ETCD_<FLAG>; the flags themselves are not set, as etcd refuses a flag
// and its variable together). Before etcd runs it names the members
// spec.etcd.replicas asks for, state new; once etcd answers, the members
// etcd lists, state existing; when etcd does not answer it keeps what it
// said. etcd reads these only when its data directory is empty, so existing
// members ignore them, and a member that joins finds in them the current
// members and itself, as etcd requires of a joining member. The pod template
// therefore never changes with the membership, and no member restarts for
// another one to come or go. The StatefulSet runs a pod up to the highest
// ordinal etcd lists.
//
// Preflight makes one change per pass (NextChange), each after etcd is
// healthy:
//
//   - members are added with MemberAddAsLearner on the lowest free ordinals
//     (a peer URL is its pod's DNS name), up to MaxLearners in one pass and
//     none while a learner is listed, then the StatefulSet starts their pods
//     on empty volumes; a learner does not vote, so it cannot cost the
//     quorum while it catches up, and from etcd 3.6 it is not ready, so the
//     API servers do not reach it through the client Service. etcd 3.6 and
//     later run with --max-learners=MaxLearners, so that a scale from one
//     member to three starts both new members together; etcd 3.5 holds one
//     learner and refuses the second, which is added once the first is a
//     voter. Learners are added in one pass because a pod reads the
//     membership as it starts, and etcd refuses to join with one that
//     another member added since made stale;
//   - a learner that answers is promoted; etcd refuses while it lags behind
//     the leader, and the pass looks again a few seconds later. Other
//     learners that do not answer yet do not hold it (they have no vote, so
//     the voters' quorum is what it would be without them): of two added
//     together, the first to catch up is promoted first;
//   - a member is removed from the highest ordinal, the leader handing its
//     leadership over first when it is the one to go; the next pass lowers
//     the StatefulSet's replicas, and its volume goes with its pod
//     (persistentVolumeClaimRetentionPolicy whenScaled: Delete);
//   - a voter whose data etcd refuses is replaced (see below): removed from
//     etcd, its volume and pod deleted, so that the StatefulSet starts it
//     again on an empty volume and the next pass adds it as a learner. A
//     member whose volume was lost can never come back on its own: etcd
//     refuses a member whose log is gone. The replacement is told in a
//     Warning event.
//
// # Replacing a member, and only on evidence
//
// A member that is down may be down for many reasons, and deleting its
// volume is the one step that cannot be undone, so the controller replaces
// a member only on evidence that its data is what fails, never for being
// down alone. etcd does not say so in a way the controller can read: etcd
// exits with code 2 both on a flag it refuses (flag parsing: `invalid
// value "not-a-number" for flag -snapshot-count`) and on a panic (on an
// emptied data directory, as the member it was: "tocommit(59) is out of
// range [lastIndex(0)]. Was the raft log corrupted, truncated, or lost?";
// on an overwritten database: "failed to open database: invalid
// database"; each tried with etcd 3.6), and with 1 on most other fatal
// errors, whatever the cause; and its log is text for people. What
// does tell them apart is what changed. A member's pod runs one revision of
// the StatefulSet's pod spec (its controller-revision-hash label); the
// controller records, for each member, the revision it last ran healthy on
// (answering etcd with a leader), in the annotation
// HealthyRevisionsAnnotation of the members ConfigMap. Diagnose then tells:
//
//   - a member whose pod runs a revision it never ran healthy on (NewSpec)
//     fails with what it was told to run: new args, image, version. Its
//     rollout stops there (the StatefulSet updates the highest ordinal
//     first and waits for each pod to be ready, and the controller starts
//     no other change while a member is down), EtcdReady says
//     EtcdRolloutStuck with the member and its container's last words, and
//     nothing is replaced: correcting the spec, or putting it back, rolls
//     the member again on its own volume (the StatefulSet deletes a pod of
//     an older revision before it waits for one to be ready, unless the
//     MaxUnavailableStatefulSet feature gate, off by default, is on);
//   - a member whose pod runs the very revision it ran healthy on, and whose
//     etcd container exits by itself with an error (a code from 1 to 127,
//     not OOMKilled), again after at least two restarts (Data), fails on
//     what its volume holds, the one thing that changed: a volume lost or
//     replaced by an empty one, a database overwritten or corrupt. That
//     member is replaced;
//   - a member whose pod runs the very revision it ran healthy on, on a
//     volume whose claim is not the one it ran healthy on (its claim was
//     deleted and the StatefulSet made a new, empty one; the controller
//     records each member's claim beside its revision, in the annotation
//     HealthyClaimsAnnotation), and whose etcd exits by itself with an
//     error, even once (Lost), has lost its data for certain: no wait or
//     restart can bring it back, and nothing is on the new volume to lose.
//     So has a member on the very revision it ran healthy on whose pod's
//     wait for peers found its data directory empty while etcd lists it as
//     a voter that has run (it exits with join.ExitLostData, and etcd never
//     starts on it, see package join).
//     That member is replaced at once;
//   - anything else (Elsewhere) is no evidence about the data and is left
//     alone, said in EtcdReady (EtcdMemberDown) once it lasts longer than
//     ReplaceAfter: a pod without a node (a cordoned or lost node), an image
//     that does not pull, a container killed by a signal (a failed liveness
//     probe on a slow disk) or for its memory, an etcd that runs but does
//     not answer (a slow disk, a cut network). To replace such a member by
//     hand, delete its claim and pod: it then starts on an empty volume,
//     which etcd refuses, and that is evidence.
//
// The last words are the tail of the container's log, which the kubelet
// keeps as its termination message (terminationMessagePolicy
// FallbackToLogsOnError); they are quoted, never acted on. A member never
// seen healthy on any revision (one down when a controller without this
// record was upgraded) is NewSpec and is not replaced. An image tag moved
// under a running control plane is a change the revision does not show.
//
// A replacement waits until the member has been down for longer than
// ReplaceAfter (a Lost one does not wait), is made only while the healthy voters are a quorum of all
// the voters (so etcd accepts the removal and those that stay keep a
// quorum: never for one member), one at a time (not while a learner
// catches up), ReplaceBackoff after the one before, doubled for each
// further replacement within ReplaceWindow, and at most MaxReplacements
// times per member within ReplaceWindow; beyond that EtcdReady says
// EtcdReplacementLimit, with a Warning event, until the window frees one or
// someone removes the record. The replacements are recorded, before each
// is made (so that none goes uncounted), in the annotation
// ReplacementsAnnotation of the members ConfigMap: not the status, since
// neither record can be observed again once lost, and the ConfigMap lives
// and goes with the etcd it describes; every write of a record is refused
// when the ConfigMap changed since it was read.
//
// # Databases
//
// Before any of these, with every member healthy, Preflight keeps the
// databases (Maintain), one step a pass: a member is defragmented once
// DefragMinFree of its database file, and at least half of it, is unused
// (space that deleted data left behind once etcd's auto-compaction ran),
// one member at a time and the leader last, since a defragmentation blocks
// the member. Under a NOSPACE alarm (etcd refuses writes at its quota) any
// member with space to free is defragmented, and the alarm is disarmed once
// every database is below its quota again; until then EtcdReady says which
// member holds how much data against what quota. An event tells the space
// each defragmentation freed and the time it took, and the metrics
// hostedcp_etcd_defragmentation_duration_seconds and
// hostedcp_etcd_defragmentation_freed_bytes_total count them.
//
// A rollout (a new version, image or flag: any change of the StatefulSet's
// pods beyond its replicas; not the stamp of who rendered it, see package
// rollout) waits for a healthy etcd too, unless one is already under way,
// which may be corrected whatever etcd's health, or the only members down
// are learners whose pods the StatefulSet does not run yet (applying it
// starts them, and every voter answers), or no member
// answers at all (nothing serves that it could disturb, and it may be what
// brings etcd back; a controller that cannot reach etcd's pods, as in `make
// dev`, then still rolls it). A rollout that raises the quota may start under
// a NOSPACE alarm, before the databases are kept, which would hold it as
// long as etcd refuses writes; a database that etcd let a little past its
// quota (by the writes it accepted before it raised the alarm) counts as
// that alarm, not as another problem. Without etcd's member list nothing is
// resized.
//
// # Restore
//
// With spec.etcd.restore each member's pod first runs the etcd-restore init
// container (cmd/etcd-restore, package restore), with the etcd container's
// own --name, --data-dir, --initial-advertise-peer-urls and
// --initial-cluster-token and its membership variables, and the snapshot's
// key, presigned URL and CA from the Secret <cluster>-etcd-restore as
// environment variables (a volume would roll the pods each time the URL is
// renewed). The control plane reconciler has package backup's Restorer
// write that Secret; until it is written, no member starts. A member that founds the cluster on an
// empty volume restores the snapshot; any other does nothing. Existing
// tells from the members ConfigMap whether etcd ever answered.
//
// A restore in place (status.etcd.restoring, which the control plane
// reconciler records for the restore-etcd annotation) goes in steps that observation
// alone tells apart, so that a controller restarted midway goes on: while
// any etcd pod was not started for this restore (its template's
// EtcdRestoreIDAnnotation names another, StalePods), or the restore Secret
// is not written for it yet, the StatefulSet runs no pod; then the members
// spec.etcd.replicas asks for start together, state new, each restoring in
// its init container whatever its volume holds (the ID in the Secret tells
// it to); once etcd answers with every one of them, voting and healthy,
// it is Restored. Throughout, Preflight changes nothing, and the volumes
// stay when the StatefulSet scales to no pod (whenScaled: Retain). The
// controller stops the API servers, controller-manager and scheduler
// before etcd's phase, and ends the restore once it is Restored.
//
// # Volumes
//
// Each member's volume is the larger of spec.etcd.volumeSize and what the
// members' claims ask for (a claim never shrinks), and the quota follows the
// smallest volume a member has (render.Observed.EtcdVolumeCapacity), so
// that no member runs with a quota its volume cannot hold. Before anything
// else Preflight grows the volumes to that size, or to what autoGrow asks:
// once a member's database fills AutoGrowPercent of its quota, by half,
// rounded up to a GiB, up to spec.etcd.maxVolumeSize, one growth after the
// other; under a NOSPACE alarm too, which the growth's reason then tells.
// Where the claims' StorageClass allows expansion, each claim asks
// for the new size, and the StatefulSet, whose claim template cannot change,
// is deleted with its pods orphaned; the next pass creates it again and it
// adopts the running pods, whose template is the same. Once every claim
// has the new capacity, the quota rises in an ordinary rollout; until then
// EtcdReady waits, with what the claims' resize conditions say. Where the
// StorageClass refuses, a growth of the spec holds EtcdReady
// (EtcdVolumeNotExpandable, and admission lets the spec go back to the
// volumes), and one of autoGrow is told in a Warning event. VolumeUsage,
// for the status, is the largest database a member reports (rounded up to
// a whole MiB): what counts against the quota, not the write-ahead log
// beside it.
//
// Of the renderer it imports only the building blocks (render), the
// readiness rules and the applier's digest, so that the extension, which
// only checks health, carries no other component.
package etcd
