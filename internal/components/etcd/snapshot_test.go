package etcd

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A snapshot comes from a member that applied everything any member had,
// a follower when one did: a lagging follower would store a snapshot
// without writes acknowledged before it was asked for.
func TestSnapshotSource(t *testing.T) {
	leader := Status{Endpoint: "https://m0:2379", MemberID: 1, Leader: 1, Revision: 2600}
	upToDate := Status{Endpoint: "https://m2:2379", MemberID: 3, Leader: 1, Revision: 2600}
	lagging := Status{Endpoint: "https://m1:2379", MemberID: 2, Leader: 1, Revision: 2049}
	for _, tc := range []struct {
		name     string
		statuses []Status
		want     string
	}{
		{"an up-to-date follower before the leader", []Status{leader, lagging, upToDate}, upToDate.Endpoint},
		{"the leader rather than a lagging follower", []Status{leader, lagging}, leader.Endpoint},
		{"a lagging follower when nothing newer answers", []Status{lagging, {Endpoint: "https://m0:2379", Err: errors.New("timeout")}}, lagging.Endpoint},
		{"never a learner, however new", []Status{lagging, {Endpoint: "https://m3:2379", MemberID: 4, Leader: 1, Revision: 2700, Learner: true}}, lagging.Endpoint},
		{"never a member without a leader", []Status{lagging, {Endpoint: "https://m3:2379", MemberID: 4, Revision: 2700}}, lagging.Endpoint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := snapshotSource(tc.statuses)
			assert.True(t, ok)
			assert.Equal(t, tc.want, got.Endpoint)
		})
	}
	_, ok := snapshotSource([]Status{{Endpoint: "https://m0:2379", Err: errors.New("refused")}})
	assert.False(t, ok, "no member answers with a leader")
}
