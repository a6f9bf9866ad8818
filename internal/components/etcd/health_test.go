package etcd

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEvaluate(t *testing.T) {
	members := []Member{{ID: 0xa1, Name: "etcd-0"}, {ID: 0xb2, Name: "etcd-1"}, {ID: 0xc3, Name: "etcd-2"}}
	answer := func(ep string, id uint64) Status {
		return Status{Endpoint: ep, MemberID: id, Leader: 0xa1, DBSize: 20 << 20, DBSizeQuota: 2 << 30}
	}
	healthy := func() Observation {
		return Observation{
			Statuses: []Status{answer("10.0.0.2:2379", 0xb2), answer("10.0.0.1:2379", 0xa1), answer("10.0.0.3:2379", 0xc3)},
			Members:  members,
		}
	}
	refused := errors.New("connection refused")
	for _, tc := range []struct {
		name string
		edit func(*Observation)
		want []string
	}{
		{"healthy", func(*Observation) {}, nil},
		{"a member is down", func(o *Observation) {
			o.Statuses[2] = Status{Endpoint: "10.0.0.3:2379", Err: refused}
		}, []string{"no answer from 10.0.0.3:2379", "member etcd-2 does not answer"}},
		{"a member is not published", func(o *Observation) { o.Statuses = o.Statuses[:2] }, []string{"member etcd-2 does not answer"}},
		{"nobody answers", func(o *Observation) {
			*o = Observation{Statuses: []Status{{Endpoint: "10.0.0.2:2379", Err: refused}, {Endpoint: "10.0.0.1:2379", Err: refused}}}
		}, []string{"no answer from 10.0.0.1:2379", "no answer from 10.0.0.2:2379", "no member answers"}},
		{"no leader and no quorum", func(o *Observation) {
			for i := range o.Statuses {
				o.Statuses[i].Leader = 0
			}
			o.Members, o.MembersErr = nil, refused
		}, []string{"member a1 has no leader", "member b2 has no leader", "member c3 has no leader", "the member list is unavailable (no quorum)"}},
		{"members disagree on the leader", func(o *Observation) { o.Statuses[0].Leader = 0xb2 }, []string{"members disagree on the leader"}},
		{"alarms", func(o *Observation) {
			o.Alarms = []Alarm{{MemberID: 0xc3, Type: "NOSPACE"}, {MemberID: 0xa1, Type: "CORRUPT"}, {MemberID: 0xa1, Type: "NOSPACE"}}
		}, []string{"alarm CORRUPT is raised on member etcd-0", "alarm NOSPACE is raised on member etcd-0", "alarm NOSPACE is raised on member etcd-2"}},
		{"alarms cannot be listed", func(o *Observation) { o.AlarmsErr = refused }, []string{"the alarm list is unavailable"}},
		{"a database near its quota", func(o *Observation) { o.Statuses[1].DBSize = 1700 << 20 }, []string{
			"member etcd-0 database is 1700 MiB, 83% of its 2048 MiB quota (limit 80%)",
		}},
		{"no quota reported: etcd's default", func(o *Observation) { o.Statuses[0].DBSizeQuota, o.Statuses[0].DBSize = 0, 2<<30 }, []string{
			"member etcd-1 database is 2048 MiB, 100% of its 2048 MiB quota (limit 80%)",
		}},
		{"no quota reported: the configured one", func(o *Observation) {
			o.Quota = 704 << 20
			o.Statuses[0].DBSizeQuota, o.Statuses[0].DBSize = 0, 600<<20
		}, []string{"member etcd-1 database is 600 MiB, 85% of its 704 MiB quota (limit 80%)"}},
		{"a reported quota wins over the configured one", func(o *Observation) {
			o.Quota = 704 << 20
			o.Statuses[0].DBSize = 600 << 20
		}, nil},
		{"a member that never started", func(o *Observation) { o.Members = append(o.Members, Member{ID: 0xd4}) }, []string{"member d4 has not started"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := healthy()
			tc.edit(&o)
			r := Evaluate(o, DefaultQuotaRatio)
			assert.Equal(t, tc.want, r.Problems)
			assert.Equal(t, len(tc.want) == 0, r.Healthy())
		})
	}
}

func TestReportString(t *testing.T) {
	assert.Equal(t, "healthy", Report{}.String())
	assert.Equal(t, "a; b", Report{Problems: []string{"a", "b"}}.String())
}

// A full database is told apart from other problems: NOSPACE alarms and
// databases at their quota only, which a larger quota may heal.
func TestEvaluateTellsAFullDatabaseApart(t *testing.T) {
	full := func() Observation {
		return Observation{
			Members:  []Member{{ID: 0xa1, Name: "etcd-0"}},
			Statuses: []Status{{Endpoint: "10.0.0.1:2379", MemberID: 0xa1, Leader: 0xa1, DBSize: 225 << 20, DBSizeQuota: 224 << 20}},
			Alarms:   []Alarm{{MemberID: 0xa1, Type: "NOSPACE"}},
		}
	}
	r := Evaluate(full(), 1)
	assert.Equal(t, []string{"member etcd-0 database is 225 MiB, 100% of its 224 MiB quota (limit 100%)", "alarm NOSPACE is raised on member etcd-0"}, r.Problems)
	assert.True(t, r.OnlyFull)

	corrupt := full()
	corrupt.Alarms = append(corrupt.Alarms, Alarm{MemberID: 0xa1, Type: "CORRUPT"})
	assert.False(t, Evaluate(corrupt, 1).OnlyFull, "a CORRUPT alarm too")

	leaderless := full()
	leaderless.Statuses[0].Leader = 0
	assert.False(t, Evaluate(leaderless, 1).OnlyFull, "no leader too")

	assert.True(t, Evaluate(Observation{Members: full().Members, Statuses: []Status{{Endpoint: "10.0.0.1:2379", MemberID: 0xa1, Leader: 0xa1}}}, 1).OnlyFull,
		"healthy: no problem that is not of a full database")
}
