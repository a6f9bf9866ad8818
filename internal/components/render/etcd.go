package render

import "time"

// EtcdMember is a member of a running etcd as the controller observed it.
type EtcdMember struct {
	// Name is the pod the member runs in, known from its peer URL even
	// before it starts.
	Name string
	// ID is etcd's ID of the member; zero when only the record named it.
	ID uint64
	// Learner tells that the member does not vote yet.
	Learner bool
	// Healthy tells that the member answered and knows a leader.
	Healthy bool
	// Leader tells that the member leads.
	Leader bool
	// DownSince is when the member's pod last turned not ready; zero while
	// it is ready or has no pod.
	DownSince time.Time
	// DBSize is the size of its database file, DBSizeInUse the part that
	// holds data (the rest a defragmentation frees), Quota its backend
	// quota; zero when it did not answer.
	DBSize, DBSizeInUse, Quota int64
	// Pod is what its pod shows; zero when it has none.
	Pod EtcdPod
}

// EtcdPod is what a member's pod shows of the member: the spec it runs and
// how its etcd container fares, from which the controller tells why a
// member is down.
type EtcdPod struct {
	// Revision is the StatefulSet revision of the pod's spec (its
	// controller-revision-hash label).
	Revision string
	// Running tells that its etcd container runs.
	Running bool
	// Waiting is why the container does not run, when it does not: the
	// reason of a pod without a node (Unschedulable), or the container's
	// waiting reason (CrashLoopBackOff, ImagePullBackOff, ...); Message is
	// what the scheduler or the kubelet said with it.
	Waiting, Message string
	// Restarts counts the restarts of its etcd container.
	Restarts int32
	// Exit is how its etcd container last ended; nil when it never did.
	Exit *EtcdExit
	// Claim is the UID of the claim of its data volume; empty when it has
	// none (yet).
	Claim string
	// LostData tells that its wait for peers last ended finding its data
	// directory empty while etcd lists it as a voter that has run
	// (join.ExitLostData): its data is gone, and etcd did not start on it.
	LostData bool
}

// EtcdExit is how an etcd container ended.
type EtcdExit struct {
	// Code is its exit code: from 128 on, a signal killed it.
	Code int32
	// Reason is the kubelet's (Error, OOMKilled, ...), Message the
	// container's last words (the tail of its log).
	Reason, Message string
}

// EtcdReplacement is a member the controller replaced, and when.
type EtcdReplacement struct {
	Member string    `json:"member"`
	At     time.Time `json:"at"`
}

// EtcdMembership is the membership of a running etcd. It decides the pods
// the StatefulSet runs and the cluster a starting member joins.
type EtcdMembership struct {
	// Members are in the order of their pods' ordinals.
	Members []EtcdMember
	// Existing tells that the cluster exists, so a member that starts
	// joins it rather than founding it.
	Existing bool
	// Answered tells that etcd answered in this pass: Members are its
	// member list, with their health. Otherwise they are the members the
	// controller last recorded, and their health is not known.
	Answered bool
	// Problems say what keeps etcd from being healthy (no leader, a member
	// down, an alarm); none when it is.
	Problems []string
	// OnlyStartingLearners tells that every problem is of learners that do
	// not answer yet, which hold no promotion of a learner that does: a
	// learner has no vote, so one still starting costs no quorum.
	OnlyStartingLearners bool
	// NoSpace tells that a NOSPACE alarm is raised: etcd refuses writes.
	NoSpace bool
	// OnlyFull tells that every problem is of a full database: a NOSPACE
	// alarm, or a database at its quota (true when there is none).
	OnlyFull bool
	// HealthyRevisions are the revisions of the pod spec each member last ran
	// healthy on, as the controller recorded them.
	HealthyRevisions map[string]string
	// HealthyClaims are the UIDs of the claims of the volumes each member
	// last ran healthy on, as the controller recorded them.
	HealthyClaims map[string]string
	// Replacements are the replacements the controller recorded, oldest
	// first.
	Replacements []EtcdReplacement
}
