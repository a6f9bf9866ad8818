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
	// NoSpace tells that a NOSPACE alarm is raised: etcd refuses writes.
	NoSpace bool
	// OnlyFull tells that every problem is of a full database: a NOSPACE
	// alarm, or a database at its quota (true when there is none).
	OnlyFull bool
}
