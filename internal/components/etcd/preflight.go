package etcd

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Preflight guards a running etcd, as Cluster API's kubeadm control plane
// checks its etcd before it scales. A rollout (a new version, image or flag)
// and every membership change wait for a healthy etcd: a leader, every
// member answering, no alarm. Membership changes are made here, one per
// pass, through etcd's API (see nextChange); the pass that made one ends, and
// the next renders the new membership.
func (c Component) Preflight(ctx context.Context, r client.Reader, in render.Input) (readiness.Outcome, error) {
	live := &appsv1.StatefulSet{}
	err := r.Get(ctx, client.ObjectKey{Namespace: in.Namespace(), Name: contract.EtcdName(in.ClusterName())}, live)
	if apierrors.IsNotFound(err) {
		return readiness.Ready(""), nil // nothing runs yet
	}
	if err != nil {
		return readiness.Outcome{}, fmt.Errorf("read the etcd StatefulSet: %w", err)
	}
	next, changes := nextChange(in)
	rollout := startsRollout(live, statefulSet(in))
	m := in.Etcd
	if have, want := ptr.Deref(live.Spec.Replicas, 0), pods(in); have != want && (m == nil || !m.Answered) {
		// Only etcd's member list may resize a running etcd.
		return poll(readiness.Waiting(v1alpha1.EtcdUnhealthyReason,
			"waiting for etcd to answer before changing its members from %d to %d", have, want)), nil
	}
	if !changes && !rollout {
		return readiness.Ready(""), nil
	}
	what := "rolling out a new spec of etcd"
	if changes {
		what = next.String()
	}
	switch {
	case m == nil || !m.Answered:
		return poll(readiness.Waiting(v1alpha1.EtcdUnhealthyReason, "waiting for etcd to answer before %s", what)), nil
	case len(m.Problems) > 0:
		return poll(readiness.Waiting(v1alpha1.EtcdUnhealthyReason, "waiting for a healthy etcd before %s: %s",
			what, joinProblems(m.Problems))), nil
	case !changes || c.Clients == nil:
		return readiness.Ready(""), nil
	}
	return c.make(ctx, r, in, next)
}

func poll(out readiness.Outcome) readiness.Outcome {
	out.Poll = true
	return out
}

// startsRollout tells whether applying want would start a rollout of a
// StatefulSet that is settled. A rollout already under way may be changed
// whatever etcd's health: the change may be the fix that heals it.
func startsRollout(live, want *appsv1.StatefulSet) bool {
	settled := live.Status.ObservedGeneration >= live.Generation && live.Status.CurrentRevision == live.Status.UpdateRevision
	return settled && !apiequality.Semantic.DeepDerivative(want.Spec.Template, live.Spec.Template)
}

// changeKind is a kind of membership change.
type changeKind int

const (
	addLearner changeKind = iota + 1
	promote
	remove
)

// change is one membership change: a member to add, promote or remove.
type change struct {
	kind   changeKind
	name   string
	member render.EtcdMember
}

func (c change) String() string {
	switch c.kind {
	case addLearner:
		return "adding member " + c.name + " as a learner"
	case promote:
		return "promoting member " + c.name + " to a voter"
	default:
		return "removing member " + c.name
	}
}

// nextChange is the next step from etcd's membership towards the members
// spec.etcd.replicas asks for, one change at a time: a learner that answers
// is promoted (etcd refuses while it lags behind the leader); with no
// learner, a member is added as a learner, on the lowest free ordinal, or
// the member of the highest ordinal is removed, so that the StatefulSet
// then runs or deletes its pod. A learner that does not answer yet is no
// change: its pod has to start first.
func nextChange(in render.Input) (change, bool) {
	m := in.Etcd
	if m == nil || !m.Answered {
		return change{}, false
	}
	taken := map[int]bool{}
	var voters []render.EtcdMember
	for _, member := range m.Members {
		taken[ordinal(in.ClusterName(), member.Name)] = true
		if !member.Learner {
			voters = append(voters, member)
			continue
		}
		if member.Healthy {
			return change{kind: promote, name: member.Name, member: member}, true
		}
		return change{}, false
	}
	want := int(Replicas(in.ControlPlane))
	switch {
	case len(voters) < want:
		i := 0
		for taken[i] {
			i++
		}
		return change{kind: addLearner, name: podName(in.ClusterName(), i)}, true
	case len(voters) > want:
		last := voters[len(voters)-1]
		return change{kind: remove, name: last.Name, member: last}, true
	}
	return change{}, false
}

// make makes a change through the leader and ends the pass, which the next
// one observes.
func (c Component) make(ctx context.Context, r client.Reader, in render.Input, next change) (readiness.Outcome, error) {
	etcdPods := &corev1.PodList{}
	if err := r.List(ctx, etcdPods, client.InNamespace(in.Namespace()), client.MatchingLabels(in.Selector(contract.EtcdComponent))); err != nil {
		return readiness.Outcome{}, fmt.Errorf("list etcd pods: %w", err)
	}
	t, err := PodsTarget(ctx, r, types.NamespacedName{Namespace: in.Namespace(), Name: in.ClusterName()}, etcdPods.Items)
	if err != nil {
		return readiness.Outcome{}, err
	}
	leader, endpoint := leaderOf(in.Etcd, t)
	if endpoint == "" {
		return poll(readiness.Waiting(v1alpha1.EtcdUnhealthyReason, "waiting for etcd's leader to be reachable before %s", next)), nil
	}
	switch next.kind {
	case addLearner:
		err = c.Clients.AddLearner(ctx, t, endpoint, memberURL(in, next.name, peerPort))
	case promote:
		err = c.Clients.Promote(ctx, t, endpoint, next.member.ID)
		if errors.Is(err, ErrLearnerBehind) {
			return poll(readiness.Waiting(v1alpha1.EtcdMembershipReason, "member %s catches up with the leader as a learner", next.name)), nil
		}
	case remove:
		if next.member.ID == leader.ID {
			// The leader steps down as it leaves; handing over first spares the
			// cluster an election.
			if err := c.Clients.MoveLeader(ctx, t, endpoint, successor(in.Etcd, leader)); err != nil {
				return readiness.Outcome{}, fmt.Errorf("move etcd's leadership away from %s: %w", leader.Name, err)
			}
			return poll(readiness.Waiting(v1alpha1.EtcdMembershipReason, "moved etcd's leadership away from %s before removing it", leader.Name)), nil
		}
		err = c.Clients.Remove(ctx, t, endpoint, next.member.ID)
	}
	if err != nil {
		return readiness.Outcome{}, fmt.Errorf("etcd: %s: %w", next, err)
	}
	return poll(readiness.Waiting(v1alpha1.EtcdMembershipReason, "%s (%d voting members wanted)", next, Replicas(in.ControlPlane))), nil
}

// leaderOf is the leader and the endpoint of its pod; empty when either is
// not known.
func leaderOf(m *render.EtcdMembership, t Target) (render.EtcdMember, string) {
	for _, member := range m.Members {
		if !member.Leader {
			continue
		}
		for ep, name := range t.Names {
			if name == member.Name {
				return member, ep
			}
		}
	}
	return render.EtcdMember{}, ""
}

// successor is the healthy voter of the lowest ordinal other than leader.
func successor(m *render.EtcdMembership, leader render.EtcdMember) uint64 {
	for _, member := range m.Members {
		if member.ID != leader.ID && !member.Learner && member.Healthy {
			return member.ID
		}
	}
	return 0
}

// membershipProgress says what a membership change still waits for, once
// the StatefulSet has rolled out: a learner to catch up, or the next change.
func membershipProgress(in render.Input) (readiness.Outcome, bool) {
	m := in.Etcd
	if m == nil || !m.Answered {
		return readiness.Outcome{}, false
	}
	voters := 0
	for _, member := range m.Members {
		if member.Learner {
			return poll(readiness.Waiting(v1alpha1.EtcdMembershipReason, "member %s catches up with the leader as a learner", member.Name)), true
		}
		voters++
	}
	if want := int(Replicas(in.ControlPlane)); voters != want {
		return poll(readiness.Waiting(v1alpha1.EtcdMembershipReason, "etcd has %d voting members and spec.etcd.replicas asks for %d", voters, want)), true
	}
	return readiness.Outcome{}, false
}

func joinProblems(problems []string) string { return Report{Problems: problems}.String() }
