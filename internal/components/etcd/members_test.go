package etcd

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/probes"
)

// An answer is news to the controller (a pass at once) when what a pass
// decides on changed, not when a database grew: an idle etcd asked every
// pass must not bring a pass per answer.
func TestNewsIsWhatAPassDecidesOn(t *testing.T) {
	seen := func(leader uint64, dbSize int64, learner bool) probes.Answer[Seen] {
		return probes.Answer[Seen]{Value: Seen{
			Observation: Observation{
				Statuses: []Status{
					{Endpoint: "10.0.0.1:2379", MemberID: 1, Leader: leader, DBSize: dbSize, Revision: dbSize},
					{Endpoint: "10.0.0.2:2379", MemberID: 2, Leader: leader, DBSize: dbSize, Learner: learner},
				},
				Members: []Member{{ID: 1, Name: "demo-etcd-0"}, {ID: 2, Name: "demo-etcd-1", Learner: learner}},
			},
			Pods: map[string]string{"10.0.0.1:2379": "demo-etcd-0", "10.0.0.2:2379": "demo-etcd-1"},
		}}
	}
	assert.True(t, sameGist(seen(1, 100, true), seen(1, 4096, true)), "a database that grew")
	assert.False(t, sameGist(seen(1, 100, true), seen(2, 100, true)), "a new leader")
	assert.False(t, sameGist(seen(1, 100, true), seen(1, 100, false)), "a learner promoted")
	down := seen(1, 100, false)
	down.Value.Statuses[1] = Status{Endpoint: "10.0.0.2:2379", Err: errors.New("deadline exceeded")}
	assert.False(t, sameGist(seen(1, 100, false), down), "a member that stopped answering")
	withAlarm := seen(1, 100, false)
	withAlarm.Value.Alarms = []Alarm{{MemberID: 1, Type: "NOSPACE"}}
	assert.False(t, sameGist(seen(1, 100, false), withAlarm), "an alarm")
}

// An answer asked before the newest etcd pod was created is not decided
// on: it was given for the pod that pod replaced (on another spec or
// volume). The creation timestamp is truncated to the second, so a second
// is added; and a clock behind the API server's never outdates answers
// asked after the pass.
func TestPodsSince(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	pod := func(created time.Time) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
	}
	assert.Equal(t, now.Add(-9*time.Second), podsSince([]corev1.Pod{pod(now.Add(-time.Hour)), pod(now.Add(-10 * time.Second))}, now))
	assert.Equal(t, now, podsSince([]corev1.Pod{pod(now.Add(-500 * time.Millisecond).Truncate(time.Second))}, now), "created in the second before now")
	assert.Equal(t, now, podsSince([]corev1.Pod{pod(now.Add(time.Minute))}, now), "the API server's clock ahead")
	assert.True(t, podsSince(nil, now).IsZero())
}

// A learner that does not answer yet is a problem of etcd, but not one that
// holds the promotion of another learner (OnlyStartingLearners): it has no
// vote. A voter that does not answer holds everything.
func TestOnlyStartingLearners(t *testing.T) {
	peer := func(i int) string { return "https://demo-etcd-" + strconv.Itoa(i) + ".demo-etcd-peer.default.svc:2380" }
	peers := map[string]string{peer(0): "demo-etcd-0", peer(1): "demo-etcd-1", peer(2): "demo-etcd-2"}
	pods := map[string]string{"10.0.0.1:2379": "demo-etcd-0", "10.0.0.2:2379": "demo-etcd-1", "10.0.0.3:2379": "demo-etcd-2"}
	observe := func(learners bool, down int) Observation {
		o := Observation{}
		for i := range 3 {
			id := uint64(0xa0 + i)
			o.Members = append(o.Members, Member{ID: id, Name: "demo-etcd-" + strconv.Itoa(i), Learner: learners && i > 0, PeerURLs: []string{peer(i)}})
			s := Status{Endpoint: "10.0.0." + strconv.Itoa(i+1) + ":2379", MemberID: id, Leader: 0xa0, Learner: learners && i > 0}
			if i == down {
				s = Status{Endpoint: s.Endpoint, Err: errors.New("connection refused")}
			}
			o.Statuses = append(o.Statuses, s)
		}
		return o
	}
	starting := MembershipOf(observe(true, 2), pods, peers)
	assert.Equal(t, []string{"no answer from 10.0.0.3:2379", "member demo-etcd-2 does not answer"}, starting.Problems)
	assert.True(t, starting.OnlyStartingLearners, "a learner still starting holds no promotion")

	voterDown := MembershipOf(observe(true, 0), pods, peers)
	assert.NotEmpty(t, voterDown.Problems)
	assert.False(t, voterDown.OnlyStartingLearners, "a voter that does not answer holds every change")

	both := observe(true, 2)
	both.Statuses[0] = Status{Endpoint: both.Statuses[0].Endpoint, Err: errors.New("connection refused")}
	assert.False(t, MembershipOf(both, pods, peers).OnlyStartingLearners, "nor does a learner still starting beside a voter down")

	healthy := MembershipOf(observe(false, -1), pods, peers)
	assert.Empty(t, healthy.Problems)
	assert.False(t, healthy.OnlyStartingLearners)
}
