package etcd

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// DefaultQuotaRatio is the share of its backend quota a member's database
// may fill before the cluster counts as unhealthy: at the quota etcd raises
// NOSPACE and refuses writes, and an upgrade is no time to get there.
const DefaultQuotaRatio = 0.8

// defaultQuotaBytes is etcd's default backend quota, assumed for members
// that do not report theirs when their configured quota is not known either.
const defaultQuotaBytes = 2 << 30

// Member is an etcd member as the member list reports it. A member that was
// added but never started has no name yet.
type Member struct {
	ID      uint64
	Name    string
	Learner bool
	// PeerURLs are where its peers reach it; a member added but not started
	// is known by them alone.
	PeerURLs []string
}

// Status is one endpoint's answer to a status request, or Err when it gave
// none.
type Status struct {
	Endpoint string
	MemberID uint64
	Leader   uint64
	// Learner is true while the member catches up without a vote.
	Learner     bool
	DBSize      int64
	DBSizeInUse int64
	DBSizeQuota int64
	// Revision is the store's revision when the member answered.
	Revision int64
	Err      error
}

// Alarm is an alarm raised on a member, such as NOSPACE or CORRUPT.
type Alarm struct {
	MemberID uint64
	Type     string
}

// Observation is what one round of calls to an etcd cluster saw.
type Observation struct {
	Statuses []Status
	Members  []Member
	// MembersErr is set when no answering member could list the members,
	// which needs a quorum.
	MembersErr error
	Alarms     []Alarm
	AlarmsErr  error
	// Quota is the backend quota the members were started with, the
	// yardstick for members too old to report theirs (etcd before 3.6);
	// zero when not known.
	Quota int64
}

// Report is the verdict on an observation.
type Report struct {
	// Problems says what is wrong, one phrase each, in a stable order; no
	// problems means healthy.
	Problems []string
	// OnlyFull tells that every problem is of a full database: a NOSPACE
	// alarm, or a database at its quota (true when there is none).
	OnlyFull bool
}

// verdict gathers the problems of an observation, counting those of a
// full database.
type verdict struct {
	problems []string
	full     int
}

func (v *verdict) add(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

func (v *verdict) addFull(format string, args ...any) {
	v.add(format, args...)
	v.full++
}

func (v *verdict) report() Report {
	return Report{Problems: v.problems, OnlyFull: v.full == len(v.problems)}
}

// Healthy reports whether nothing is wrong.
func (r Report) Healthy() bool { return len(r.Problems) == 0 }

// String joins the problems, or says "healthy".
func (r Report) String() string {
	if r.Healthy() {
		return "healthy"
	}
	return strings.Join(r.Problems, "; ")
}

// Evaluate judges an observation against the quota ratio. Its phrases name
// members and endpoints but never quote transport errors, so the same state
// of the cluster always gives the same words.
func Evaluate(o Observation, quotaRatio float64) Report {
	names := map[uint64]string{}
	for _, m := range o.Members {
		names[m.ID] = m.Name
	}
	statuses := slices.SortedFunc(slices.Values(o.Statuses), func(a, b Status) int { return cmp.Compare(a.Endpoint, b.Endpoint) })
	answered := map[uint64]bool{}
	v := &verdict{}
	for _, s := range statuses {
		if s.Err != nil {
			v.add("no answer from %s", s.Endpoint)
			continue
		}
		answered[s.MemberID] = true
		judgeStatus(v, s, memberName(names, s.MemberID), cmp.Or(s.DBSizeQuota, o.Quota, defaultQuotaBytes), quotaRatio)
	}
	if len(answered) == 0 {
		v.add("no member answers")
		return v.report()
	}
	judgeMembership(v, o, names, answered)
	return v.report()
}

// judgeStatus judges one member's answer; quota is its backend quota.
func judgeStatus(v *verdict, s Status, name string, quota int64, quotaRatio float64) {
	if s.Leader == 0 {
		v.add("member %s has no leader", name)
	}
	if float64(s.DBSize) >= quotaRatio*float64(quota) {
		v.addFull("member %s database is %s, %d%% of its %s quota (limit %.4g%%)",
			name, mebibytes(s.DBSize), s.DBSize*100/quota, mebibytes(quota), quotaRatio*100)
	}
}

// judgeMembership judges the member list and the alarms: members that
// have not started or do not answer, a split on the leader, alarms raised.
func judgeMembership(v *verdict, o Observation, names map[uint64]string, answered map[uint64]bool) {
	if o.MembersErr != nil {
		v.add("the member list is unavailable (no quorum)")
	}
	members := slices.SortedFunc(slices.Values(o.Members), func(a, b Member) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	for _, m := range members {
		switch {
		case m.Name == "":
			v.add("member %s has not started", memberName(names, m.ID))
		case !answered[m.ID]:
			v.add("member %s does not answer", m.Name)
		}
	}
	leaders := map[uint64]bool{}
	for _, s := range o.Statuses {
		if s.Err == nil && s.Leader != 0 {
			leaders[s.Leader] = true
		}
	}
	if len(leaders) > 1 {
		v.add("members disagree on the leader")
	}
	if o.AlarmsErr != nil {
		v.add("the alarm list is unavailable")
	}
	alarms := slices.SortedFunc(slices.Values(o.Alarms), func(a, b Alarm) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(memberName(names, a.MemberID), memberName(names, b.MemberID)))
	})
	for _, a := range alarms {
		add := v.add
		if a.Type == pb.AlarmType_NOSPACE.String() {
			add = v.addFull
		}
		add("alarm %s is raised on member %s", a.Type, memberName(names, a.MemberID))
	}
}

// memberName is the member's name, or its ID in hex (as etcdctl prints it)
// while it has none.
func memberName(names map[uint64]string, id uint64) string {
	if name := names[id]; name != "" {
		return name
	}
	return strconv.FormatUint(id, 16)
}

func mebibytes(n int64) string {
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}
