package etcd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/probes"
)

// etcd reads these from its environment as --initial-cluster and
// --initial-cluster-state.
const (
	initialClusterEnv      = "ETCD_INITIAL_CLUSTER"
	initialClusterStateEnv = "ETCD_INITIAL_CLUSTER_STATE"
)

// MembersConfigMap names the ConfigMap in which the controller records the
// membership, and from which a member that starts learns the cluster it
// founds or joins.
func MembersConfigMap(cluster string) string { return contract.EtcdName(cluster) + "-members" }

// podName is the name of the pod of ordinal i.
func podName(cluster string, i int) string {
	return fmt.Sprintf("%s-%d", contract.EtcdName(cluster), i)
}

// ordinal is the ordinal of a member's pod, -1 for a name that is none.
func ordinal(cluster, name string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(name, contract.EtcdName(cluster)+"-"))
	if err != nil || i < 0 || !strings.HasPrefix(name, contract.EtcdName(cluster)+"-") {
		return -1
	}
	return i
}

// running are the names of the members the StatefulSet runs pods for, and
// whether they join an existing cluster: the membership once etcd runs,
// otherwise the members spec.etcd.replicas asks for, founding a new one.
func running(in render.Input) ([]string, bool) {
	if step := stepOf(in); step == stopping || step == restarting {
		// A restore in place founds a new cluster of the members the spec
		// asks for; none runs before all are gone.
		return specMembers(in), false
	}
	if m := in.Etcd; m != nil && len(m.Members) > 0 {
		names := make([]string, len(m.Members))
		for i, member := range m.Members {
			names[i] = member.Name
		}
		return names, m.Existing
	}
	return specMembers(in), false
}

// specMembers are the members spec.etcd.replicas asks for.
func specMembers(in render.Input) []string {
	names := make([]string, Replicas(in.ControlPlane))
	for i := range names {
		names[i] = podName(in.ClusterName(), i)
	}
	return names
}

// pods is how many pods the StatefulSet runs: one past the highest ordinal
// of a member, so that a pod goes only once its member is removed.
func pods(in render.Input) int32 {
	if stepOf(in) == stopping {
		return 0
	}
	names, _ := running(in)
	var n int32
	for _, name := range names {
		n = max(n, int32(ordinal(in.ClusterName(), name)+1)) //nolint:gosec // at most a handful of members
	}
	return n
}

// membersConfigMap records the membership as etcd reads it from its
// environment. A member with a data directory ignores both, so only a member
// that starts empty reads them: the founders of a new cluster, or a learner
// that joins. Keeping them out of the pod template means a membership change
// restarts no member.
func membersConfigMap(in render.Input) *corev1.ConfigMap {
	names, existing := running(in)
	initial := make([]string, len(names))
	for i, name := range names {
		initial[i] = name + "=" + memberURL(in, name, peerPort)
	}
	state := "new"
	if existing {
		state = "existing"
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: in.Meta(MembersConfigMap(in.ClusterName()), contract.EtcdComponent),
		Data:       map[string]string{initialClusterEnv: strings.Join(initial, ","), initialClusterStateEnv: state},
	}
}

// Membership observes a control plane's etcd for a pass: the member list and
// health etcd reports through its pods when one answers, otherwise what the
// members ConfigMap last recorded; nil before etcd runs. etcd is asked
// outside the pass, in answers (see package probes), at most answerFresh
// before: asking tells that it was asked and no answer is held yet, or
// none since the last change this Checker made, which a pass must not
// decide on again; the pass then waits for the answer, which its event
// brings.
func (c *Checker) Membership(ctx context.Context, r client.Reader, in render.Input, etcdPods []corev1.Pod, answers *probes.Pool[Seen]) (m *render.EtcdMembership, asking bool, err error) {
	cm := &corev1.ConfigMap{}
	err = r.Get(ctx, client.ObjectKey{Namespace: in.Namespace(), Name: MembersConfigMap(in.ClusterName())}, cm)
	if apierrors.IsNotFound(err) {
		cm = nil
	} else if err != nil {
		return nil, false, fmt.Errorf("read the etcd members ConfigMap: %w", err)
	}
	cluster := types.NamespacedName{Namespace: in.Namespace(), Name: in.ClusterName()}
	t, err := PodsTarget(ctx, r, cluster, etcdPods)
	if err == nil && len(t.Endpoints) > 0 {
		key := types.NamespacedName{Namespace: in.Namespace(), Name: in.ControlPlane.Name}
		answers.Outdate(key, c.changedAt(cluster))
		answers.Outdate(key, podsSince(etcdPods, time.Now()))
		a, ok := answers.Answer(ctx, key, answerFresh, time.Now(), func(ctx context.Context) (Seen, error) {
			o, err := c.Observe(ctx, t)
			return Seen{Observation: o, Pods: t.Names}, err
		})
		if !ok {
			return recorded(cm), true, nil
		}
		if a.Err != nil {
			return nil, false, a.Err
		}
		if a.Value.MembersErr == nil && len(a.Value.Members) > 0 {
			m = MembershipOf(a.Value.Observation, a.Value.Pods, peerNames(in))
			withPods(m, etcdPods)
			if err := withClaims(ctx, r, in.Namespace(), m); err != nil {
				return nil, false, err
			}
			if cm != nil {
				records(m, cm)
			}
			return m, false, nil
		}
	}
	return recorded(cm), false, nil
}

// podsSince is when the newest of etcd's pods was created, its timestamp's
// second added (it is truncated to one), and never later than now: an
// answer asked before then was given for a pod that is gone, and its health
// is not the new pod's, which may run a new spec or on a new volume (see
// recordHealthy, which records what a member ran healthy on). A pass
// decides on an answer asked since.
func podsSince(etcdPods []corev1.Pod, now time.Time) time.Time {
	var newest time.Time
	for _, p := range etcdPods {
		if created := p.CreationTimestamp.Add(time.Second); created.After(newest) {
			newest = created
		}
	}
	if newest.After(now) {
		return now
	}
	return newest
}

// answerFresh is how old an answer of etcd a pass decides on may be before
// it asks again.
const answerFresh = time.Second

// Seen is an answer of etcd to the controller's checks: what it observed,
// and the pod of each endpoint asked.
type Seen struct {
	Observation
	Pods map[string]string
}

// NewAnswers returns the Pool in which the controller asks etcd, at most
// workers control planes at once, each ask bounded by the Checker's call
// timeout.
func NewAnswers(workers int) *probes.Pool[Seen] { return probes.NewPool(workers, sameGist) }

// sameGist tells whether two answers agree on what a pass decides on: the
// members and their roles, who answers, who leads, the alarms. A database
// that grew is no news: the next pass reads it.
func sameGist(before, after probes.Answer[Seen]) bool {
	return gist(before) == gist(after)
}

func gist(a probes.Answer[Seen]) string {
	var b strings.Builder
	fmt.Fprintf(&b, "err=%t members-err=%t alarms-err=%t;", a.Err != nil, a.Value.MembersErr != nil, a.Value.AlarmsErr != nil)
	for _, s := range a.Value.Statuses {
		fmt.Fprintf(&b, "%s=%s:%t,%x,%x,%t;", s.Endpoint, a.Value.Pods[s.Endpoint], s.Err == nil, s.MemberID, s.Leader, s.Learner)
	}
	for _, m := range a.Value.Members {
		fmt.Fprintf(&b, "%x=%s,%t,%v;", m.ID, m.Name, m.Learner, m.PeerURLs)
	}
	for _, al := range a.Value.Alarms {
		fmt.Fprintf(&b, "%x:%s;", al.MemberID, al.Type)
	}
	return b.String()
}

// peerNames maps the peer URL of each member a control plane may have to its
// pod, which names a member added but not started yet.
func peerNames(in render.Input) map[string]string {
	names := map[string]string{}
	for i := range 2 * maxMembers {
		name := podName(in.ClusterName(), i)
		names[memberURL(in, name, peerPort)] = name
	}
	return names
}

// maxMembers is the most members spec.etcd.replicas asks for.
const maxMembers = 5

// MembershipOf is the membership an observation shows. pods names the pod of
// each endpoint, peers the member of each peer URL. Health is judged from
// the members' own endpoints: an endpoint of a pod whose member is gone
// (removed, its pod not yet deleted) is not a problem of the cluster.
func MembershipOf(o Observation, pods, peers map[string]string) *render.EtcdMembership {
	m := &render.EtcdMembership{Answered: true, Existing: true}
	status := map[uint64]Status{}
	for _, s := range o.Statuses {
		if s.Err == nil {
			status[s.MemberID] = s
		}
	}
	leader := uint64(0)
	names := map[string]bool{}
	own := o // as the pods name the members
	own.Members = nil
	for _, member := range o.Members {
		name := member.Name
		if len(member.PeerURLs) > 0 && peers[member.PeerURLs[0]] != "" {
			name = peers[member.PeerURLs[0]]
		}
		renamed := member
		renamed.Name = name
		own.Members = append(own.Members, renamed)
		s, answered := status[member.ID]
		if answered && s.Leader != 0 {
			leader = s.Leader
		}
		names[name] = true
		m.Members = append(m.Members, render.EtcdMember{
			Name: name, ID: member.ID, Learner: member.Learner, Healthy: answered && s.Leader != 0,
			DBSize: s.DBSize, DBSizeInUse: s.DBSizeInUse, Quota: s.DBSizeQuota,
		})
	}
	m.NoSpace = slices.ContainsFunc(o.Alarms, func(a Alarm) bool { return a.Type == pb.AlarmType_NOSPACE.String() })
	for i := range m.Members {
		m.Members[i].Leader = leader != 0 && m.Members[i].ID == leader
	}
	slices.SortFunc(m.Members, func(a, b render.EtcdMember) int {
		return cmp.Or(cmp.Compare(len(a.Name), len(b.Name)), cmp.Compare(a.Name, b.Name))
	})
	// Judged at the full quota: a database near it is no reason to hold a
	// change, a full one raises NOSPACE, which is.
	own.Statuses = slices.DeleteFunc(slices.Clone(o.Statuses), func(s Status) bool { return !names[pods[s.Endpoint]] })
	report := Evaluate(own, 1)
	m.Problems, m.OnlyFull = report.Problems, report.OnlyFull
	starting := map[string]bool{}
	for _, member := range m.Members {
		if member.Learner && !member.Healthy {
			starting[member.Name] = true
		}
	}
	if len(starting) > 0 && len(m.Problems) > 0 {
		voters := own
		voters.Members = slices.DeleteFunc(slices.Clone(own.Members), func(member Member) bool { return starting[member.Name] })
		voters.Statuses = slices.DeleteFunc(slices.Clone(own.Statuses), func(s Status) bool { return starting[pods[s.Endpoint]] })
		m.OnlyStartingLearners = Evaluate(voters, 1).Healthy()
	}
	return m
}

// withClaims records the claim of each member's data volume, which tells a
// volume that was replaced (see Lost).
func withClaims(ctx context.Context, r client.Reader, namespace string, m *render.EtcdMembership) error {
	for i := range m.Members {
		claim := &corev1.PersistentVolumeClaim{}
		err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: claimName + "-" + m.Members[i].Name}, claim)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("read the claim of member %s: %w", m.Members[i].Name, err)
		case claim.DeletionTimestamp.IsZero():
			m.Members[i].Pod.Claim = string(claim.UID)
		}
	}
	return nil
}

// withPods records what each member's pod shows, and when it turned not
// ready.
func withPods(m *render.EtcdMembership, etcdPods []corev1.Pod) {
	for i := range m.Members {
		for _, p := range etcdPods {
			if p.Name != m.Members[i].Name {
				continue
			}
			m.Members[i].Pod = podFacts(&p)
			since := p.CreationTimestamp.Time
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					if c.Status == corev1.ConditionTrue {
						since = time.Time{}
					} else {
						since = c.LastTransitionTime.Time
					}
				}
			}
			m.Members[i].DownSince = since
		}
	}
}

// recorded is the membership the members ConfigMap cm records, of unknown
// health; nil when there is none.
func recorded(cm *corev1.ConfigMap) *render.EtcdMembership {
	if cm == nil {
		return nil
	}
	m := &render.EtcdMembership{Existing: Existing(cm)}
	for entry := range strings.SplitSeq(cm.Data[initialClusterEnv], ",") {
		if name, _, ok := strings.Cut(entry, "="); ok {
			m.Members = append(m.Members, render.EtcdMember{Name: name})
		}
	}
	if len(m.Members) == 0 {
		return nil
	}
	return m
}

// Existing is whether the members ConfigMap records the members of a
// running etcd, which the controller does once etcd answered, rather than
// those a new one is founded with.
func Existing(cm *corev1.ConfigMap) bool { return cm.Data[initialClusterStateEnv] == "existing" }

// MemberStatuses are the members as the status reports them; nil when etcd
// did not answer.
func MemberStatuses(m *render.EtcdMembership) []v1alpha1.EtcdMemberStatus {
	if m == nil || !m.Answered {
		return nil
	}
	out := make([]v1alpha1.EtcdMemberStatus, len(m.Members))
	for i, member := range m.Members {
		role := v1alpha1.EtcdVoter
		if member.Learner {
			role = v1alpha1.EtcdLearner
		}
		out[i] = v1alpha1.EtcdMemberStatus{Name: member.Name, ID: strconv.FormatUint(member.ID, 16), Role: role, Healthy: member.Healthy}
	}
	return out
}

// Members are the names of the members etcd lists or, when it did not
// answer, those the controller recorded (the members it last listed, or
// those a new etcd is founded with); nil before etcd runs.
func Members(m *render.EtcdMembership) []string {
	if m == nil {
		return nil
	}
	var names []string
	for _, member := range m.Members {
		names = append(names, member.Name)
	}
	return names
}

// VolumeSize is the smallest storage capacity among the members' bound
// claims, nil when none is bound.
func VolumeSize(claims []corev1.PersistentVolumeClaim) *resource.Quantity {
	var smallest *resource.Quantity
	for _, c := range claims {
		q, ok := c.Status.Capacity[corev1.ResourceStorage]
		if !ok || c.Status.Phase != corev1.ClaimBound {
			continue
		}
		if smallest == nil || q.Cmp(*smallest) < 0 {
			smallest = &q
		}
	}
	return smallest
}

// VolumeRequest is the largest storage request among the members' claims
// (being deleted or not), nil when there is none.
func VolumeRequest(claims []corev1.PersistentVolumeClaim) *resource.Quantity {
	var largest *resource.Quantity
	for _, c := range claims {
		if q, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; ok && (largest == nil || q.Cmp(*largest) > 0) {
			largest = &q
		}
	}
	return largest
}
