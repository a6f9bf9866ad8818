package etcd

import (
	"errors"
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
