package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/apply"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/rollout"
)

// Preflight guards a running etcd, as Cluster API's kubeadm control plane
// checks its etcd before it scales. A rollout (a new version, image or flag)
// and every membership change wait for a healthy etcd: a leader, every
// member answering, no alarm (the package doc says when not). Membership
// changes are made here, one per pass, through etcd's API (see NextChange);
// the pass that made one ends, and the next renders the new membership.
// Before them the databases are kept (see Maintain), and before anything
// the volumes grow to spec.etcd.volumeSize (see growVolumes).
func (c Component) Preflight(ctx context.Context, r client.Reader, in render.Input) (readiness.Outcome, error) {
	if in.RestoringEtcd() {
		return readiness.Ready(""), nil // it stops and starts every member, without waiting for health
	}
	live := &appsv1.StatefulSet{}
	err := r.Get(ctx, client.ObjectKey{Namespace: in.Namespace(), Name: contract.EtcdName(in.ClusterName())}, live)
	if apierrors.IsNotFound(err) {
		return readiness.Ready(""), nil // nothing runs yet
	}
	if err != nil {
		return readiness.Outcome{}, fmt.Errorf("read the etcd StatefulSet: %w", err)
	}
	// Recorded before anything else, so that what a member ran healthy on is
	// known whatever the pass goes on to do.
	if err := c.recordHealthy(ctx, r, in); err != nil {
		return readiness.Outcome{}, err
	}
	if out, acted, err := c.growVolumes(ctx, r, in, live); acted || err != nil {
		return out, err
	}
	now := time.Now()
	next, changes := NextChange(in, now)
	rollout, err := startsRollout(live, statefulSet(in), in.ControlPlane, now)
	if err != nil {
		return readiness.Outcome{}, err
	}
	m := in.Etcd
	if have, want := ptr.Deref(live.Spec.Replicas, 0), pods(in); have != want && (m == nil || !m.Answered) {
		// Only etcd's member list may resize a running etcd.
		return poll(readiness.Waiting(v1alpha1.EtcdUnhealthyReason,
			"waiting for etcd to answer before changing its members from %d to %d", have, want)), nil
	}
	// Under NOSPACE what may heal it goes first: a rollout may raise the
	// quota, which keeping the databases would hold as long as etcd refuses
	// writes.
	if m == nil || !m.NoSpace || !healing(next, changes, rollout, m) {
		if out, acted, err := c.maintain(ctx, r, in); acted || err != nil {
			return out, err
		}
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
		// Only a rollout gets here (a membership change needs etcd's member
		// list). No member serves, so it can disturb nothing, and it may be
		// what brings etcd back.
		return readiness.Ready(""), nil
	case len(m.Problems) > 0 && !healing(next, changes, rollout, m) && !startsLearners(in, m, live) && !promotesBeside(next, changes, m):
		return poll(readiness.Waiting(v1alpha1.EtcdUnhealthyReason, "waiting for a healthy etcd before %s: %s",
			what, joinProblems(m.Problems))), nil
	case !changes || c.Clients == nil:
		return readiness.Ready(""), nil
	}
	return c.make(ctx, r, in, next, now)
}

func poll(out readiness.Outcome) readiness.Outcome {
	out.Poll = true
	return out
}

// startsRollout tells whether applying want would change a settled
// StatefulSet in more than its replicas, which follow the membership: the
// digest of what was last applied (apply.HashAnnotation) differs from that
// of want with the live replicas, stamped as live is (see rollout.Restamp:
// who rendered it and from which spec of the control plane changes no pod).
// A rollout already under way may be changed whatever etcd's health: the
// change may be the fix that heals it.
func startsRollout(live, want *appsv1.StatefulSet, cp *v1alpha1.HostedControlPlane, now time.Time) (bool, error) {
	settled := live.Status.ObservedGeneration >= live.Generation && live.Status.CurrentRevision == live.Status.UpdateRevision
	if !settled {
		return false, nil
	}
	want = want.DeepCopy()
	want.Spec.Replicas = live.Spec.Replicas
	rollout.Restamp(live, want, cp, now)
	u, err := apply.Unstructured(want)
	if err != nil {
		return false, err
	}
	return u.GetAnnotations()[apply.HashAnnotation] != live.Annotations[apply.HashAnnotation], nil
}

// promotesBeside tells whether the change is the promotion of a learner
// that answers while etcd's only problems are other learners that do not
// answer yet (two added together, one slower to start): they have no vote,
// so the promotion is as safe as in a healthy etcd and need not wait for
// them.
func promotesBeside(next Change, changes bool, m *render.EtcdMembership) bool {
	return changes && next.Kind == Promote && m.OnlyStartingLearners
}

// startsLearners tells whether etcd's only problems are learners it lists
// whose pods the StatefulSet does not run yet (their ordinals are past its
// replicas), each of which is one problem: applying the StatefulSet is
// what starts them, and every voter answers, so a rollout with it is as
// safe as in a healthy etcd, and waiting for their health would wait for
// ever.
func startsLearners(in render.Input, m *render.EtcdMembership, live *appsv1.StatefulSet) bool {
	pending := 0
	for _, member := range m.Members {
		if member.Healthy {
			continue
		}
		if !member.Learner || ordinal(in.ClusterName(), member.Name) < int(ptr.Deref(live.Spec.Replicas, 0)) {
			return false
		}
		pending++
	}
	return pending > 0 && len(m.Problems) == pending
}

// ChangeKind is a kind of membership change.
type ChangeKind int

// The membership changes.
const (
	AddLearner ChangeKind = iota + 1
	Promote
	Remove
	// Replace removes a member that stayed down, with its pod and volume,
	// so that it comes back empty as a new member (see ReplaceAfter).
	Replace
)

// ReplaceAfter is how long a voting member whose data etcd refuses (see
// Diagnose) stays down before it is replaced: long enough for a restart to
// bring a member back, short enough that a member whose volume was lost,
// which can never come back, does not leave the cluster one failure from
// losing its quorum for long.
const ReplaceAfter = time.Minute

// Change is one membership change: members to add, a member to promote,
// replace or remove.
type Change struct {
	Kind ChangeKind
	// Name is the pod of the member to promote, replace or remove.
	Name string
	// Names are the pods of the members to add, on the lowest free
	// ordinals: as many as etcd may hold learners at once (MaxLearners),
	// so that they start and catch up together.
	Names []string
	// Member is the member to promote or remove.
	Member render.EtcdMember
	// Why says why a member is replaced: what its pod says.
	Why string
}

func (c Change) String() string {
	switch c.Kind {
	case AddLearner:
		if len(c.Names) == 1 {
			return "adding member " + c.Names[0] + " as a learner"
		}
		return "adding members " + strings.Join(c.Names, " and ") + " as learners"
	case Promote:
		return "promoting member " + c.Name + " to a voter"
	case Replace:
		cause := ", as its etcd refuses its data"
		if c.Member.Pod.LostData {
			cause = ""
		}
		return fmt.Sprintf("replacing member %s, down since %s on the pod spec it ran healthy on%s (%s)",
			c.Name, c.Member.DownSince.UTC().Format(time.RFC3339), cause, c.Why)
	default:
		return "removing member " + c.Name
	}
}

// NextChange is the next step from etcd's membership towards the members
// spec.etcd.replicas asks for, one change at a time: a learner that answers
// is promoted (etcd refuses while it lags behind the leader); with no
// learner, a voter whose data etcd refuses is replaced, when that may be
// done (see replacement); otherwise members are added as learners, on the
// lowest free ordinals, up to MaxLearners at once, or the member of the
// highest ordinal is removed, so that the StatefulSet then runs or deletes
// their pods. Learners that do not answer yet are no change: their pods have
// to start first. No learner is added while one is listed: a pod that
// started would read a membership that another learner then made stale,
// and etcd refuses to join with it.
func NextChange(in render.Input, now time.Time) (Change, bool) {
	m := in.Etcd
	if m == nil || !m.Answered {
		return Change{}, false
	}
	taken := map[int]bool{}
	var voters []render.EtcdMember
	learners := false
	for _, member := range m.Members {
		taken[ordinal(in.ClusterName(), member.Name)] = true
		switch {
		case !member.Learner:
			voters = append(voters, member)
		case member.Healthy:
			return Change{Kind: Promote, Name: member.Name, Member: member}, true
		default:
			learners = true
		}
	}
	if learners {
		return Change{}, false
	}
	if down, why, ok := replacement(m, voters, now); ok {
		return Change{Kind: Replace, Name: down.Name, Member: down, Why: why}, true
	}
	want := int(Replicas(in.ControlPlane))
	switch {
	case len(voters) < want:
		var names []string
		for i := 0; len(names) < min(want-len(voters), MaxLearners); i++ {
			if !taken[i] {
				names = append(names, podName(in.ClusterName(), i))
			}
		}
		return Change{Kind: AddLearner, Names: names}, true
	case len(voters) > want:
		last := voters[len(voters)-1]
		return Change{Kind: Remove, Name: last.Name, Member: last}, true
	}
	return Change{}, false
}

// make makes a change through the leader and ends the pass, which the next
// one observes.
func (c Component) make(ctx context.Context, r client.Reader, in render.Input, next Change, now time.Time) (readiness.Outcome, error) {
	t, err := c.target(ctx, r, in)
	if err != nil {
		return readiness.Outcome{}, err
	}
	if next.Kind == Replace {
		err := c.recordReplacement(ctx, r, in, next.Name, now)
		if apierrors.IsConflict(err) {
			// The record changed since this pass read it: the next one decides again.
			return poll(readiness.Waiting(v1alpha1.EtcdMemberDownReason, "%s: the record of replacements changed meanwhile", next)), nil
		}
		if err != nil {
			return readiness.Outcome{}, err
		}
	}
	out, err := c.Clients.Make(ctx, t, in.Etcd, next, func(member string) string { return memberURL(in, member, peerPort) })
	if err != nil || next.Kind != Replace || out.Reason != v1alpha1.EtcdMemberReplacedReason {
		return out, err
	}
	// Its volume goes, and its pod, which the StatefulSet starts again on a
	// new, empty volume, to join as a learner.
	for _, obj := range []client.Object{
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace(), Name: claimName + "-" + next.Name}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace(), Name: next.Name}},
	} {
		if err := c.Writer.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return readiness.Outcome{}, fmt.Errorf("replace etcd member %s: delete %T %s: %w", next.Name, obj, obj.GetName(), err)
		}
	}
	return out, nil
}

// Make makes a membership change of the etcd t through its leader, found in
// m; peerURL is where a member to add will be reached. The outcome says what
// was done, or what it waits for.
func (c *Checker) Make(ctx context.Context, t Target, m *render.EtcdMembership, next Change, peerURL func(member string) string) (readiness.Outcome, error) {
	leader, endpoint := leaderOf(m, t)
	if endpoint == "" {
		return poll(readiness.Waiting(v1alpha1.EtcdUnhealthyReason, "waiting for etcd's leader to be reachable before %s", next)), nil
	}
	var err error
	switch next.Kind {
	case AddLearner:
		var added int
		added, err = c.AddLearners(ctx, t, endpoint, next.Names, peerURL)
		if added > 0 && added < len(next.Names) {
			// The members added are a change made; the others are added
			// once these are voters.
			return poll(readiness.Waiting(v1alpha1.EtcdMembershipReason, "%s (etcd refused the others for now: %v)",
				Change{Kind: AddLearner, Names: next.Names[:added]}, err)), nil
		}
	case Promote:
		err = c.Promote(ctx, t, endpoint, next.Member.ID)
		if errors.Is(err, ErrLearnerBehind) {
			return poll(readiness.Waiting(v1alpha1.EtcdMembershipReason, "member %s catches up with the leader as a learner", next.Name)), nil
		}
	case Replace:
		if next.Member.ID == leader.ID {
			return poll(readiness.Waiting(v1alpha1.EtcdUnhealthyReason, "waiting for etcd to elect another leader before %s", next)), nil
		}
		err = c.Remove(ctx, t, endpoint, next.Member.ID)
	case Remove:
		if next.Member.ID == leader.ID {
			// The leader steps down as it leaves; handing over first spares the
			// cluster an election.
			if err := c.MoveLeader(ctx, t, endpoint, successor(m, leader)); err != nil {
				return readiness.Outcome{}, fmt.Errorf("move etcd's leadership away from %s: %w", leader.Name, err)
			}
			return poll(readiness.Waiting(v1alpha1.EtcdMembershipReason, "moved etcd's leadership away from %s before removing it", leader.Name)), nil
		}
		err = c.Remove(ctx, t, endpoint, next.Member.ID)
	}
	switch {
	case reconfigurationRefused(err):
		return poll(readiness.Waiting(v1alpha1.EtcdUnhealthyReason, "waiting for etcd to accept %s: %v", next, err)), nil
	case err != nil:
		return readiness.Outcome{}, fmt.Errorf("etcd: %s: %w", next, err)
	case next.Kind == Replace:
		// A bad situation, told in a Warning event.
		return readiness.Problem(v1alpha1.EtcdMemberReplacedReason,
			"%s: removed it from etcd; its pod and volume are deleted and it comes back as a new member", next), nil
	}
	return poll(readiness.Waiting(v1alpha1.EtcdMembershipReason, "%s", next)), nil
}

// leaderOf is the leader and the endpoint of its pod; empty when either is
// not known.
func leaderOf(m *render.EtcdMembership, t Target) (render.EtcdMember, string) {
	for _, member := range m.Members {
		if member.Leader {
			return member, endpointOf(t, member.Name)
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
	if m == nil {
		return readiness.Outcome{}, false
	}
	if !m.Answered {
		if have, want := pods(in), Replicas(in.ControlPlane); have != want {
			return poll(readiness.Waiting(v1alpha1.EtcdUnhealthyReason,
				"waiting for etcd to answer before changing its members from %d to %d", have, want)), true
		}
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

// healing tells whether what waits may heal etcd's problems: a replacement
// heals a member down, and a rollout alone (which may raise the quota) a
// full database.
func healing(next Change, changes, rollout bool, m *render.EtcdMembership) bool {
	if changes {
		return next.Kind == Replace
	}
	return rollout && m.OnlyFull
}

func joinProblems(problems []string) string { return Report{Problems: problems}.String() }
