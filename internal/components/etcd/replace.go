package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd/join"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
)

// What the controller records on the members ConfigMap, beside what it
// renders there: the revision of the pod spec each member last ran healthy
// on (a JSON object, member to revision), the UID of the claim of the
// volume it ran healthy on (member to UID), and the replacements it made
// within ReplaceWindow (a JSON list of {member, at}). Annotations of the
// ConfigMap, not the status: neither can be observed again once lost, and
// the ConfigMap lives and goes with the etcd it describes.
const (
	HealthyRevisionsAnnotation = "controlplane.cluster.x-k8s.io/etcd-healthy-revisions"
	HealthyClaimsAnnotation    = "controlplane.cluster.x-k8s.io/etcd-healthy-claims"
	ReplacementsAnnotation     = "controlplane.cluster.x-k8s.io/etcd-replacements"
)

// Limits of replacements: the first waits for a member down longer than
// ReplaceAfter; each one waits ReplaceBackoff after the one before, doubled
// for every further replacement within ReplaceWindow; and no member is
// replaced more than MaxReplacements times within ReplaceWindow.
const (
	ReplaceBackoff  = 10 * time.Minute
	ReplaceWindow   = 24 * time.Hour
	MaxReplacements = 3
)

// minRestarts is how often a member's etcd must have been restarted, each
// time ending by itself, before its data counts as what it refuses: once
// may be a fluke of the moment, twice on the same spec and volume is not.
const minRestarts = 2

// Cause is why a voting member is down, as far as its pod tells.
type Cause int

// The causes, from what the pod shows.
const (
	// Elsewhere: the member cannot run or does not answer for a reason
	// outside its data (no pod, no node, no image, killed by a signal or
	// for memory, running but silent: a slow disk, a cut network). Waiting
	// or mending that is for whoever runs the node.
	Elsewhere Cause = iota
	// NewSpec: the member never ran healthy on the spec its pod has (new
	// args, image or version, or any other change of the pod template),
	// so that spec is suspect, and the rollout stops.
	NewSpec
	// Data: the member ran healthy on the very spec and ordinal it has,
	// and its etcd now ends by itself, again and again, with an error: what
	// changed is what its volume holds (lost, overwritten, corrupt).
	Data
	// Lost: the member ran healthy on the very spec it has, on another
	// volume than the one its pod has now (the claim was deleted and the
	// StatefulSet made a new, empty one), and its etcd ends by itself with
	// an error; or its pod's wait for peers found its data directory empty
	// while etcd lists it as a voter that has run (join.LostData), and etcd
	// never started: its data is gone for certain, and no wait brings it
	// back.
	Lost
)

// Diagnosis is what the controller makes of a voting member that is down.
type Diagnosis struct {
	Cause Cause
	// Says is what its pod says, in words for a condition.
	Says string
}

// Diagnose tells why a member is down from its pod, the revision of the
// pod spec it last ran healthy on and the claim of the volume it ran
// healthy on (each empty when none was recorded).
func Diagnose(member render.EtcdMember, ranHealthyOn, healthyClaim string) Diagnosis {
	p := member.Pod
	d := Diagnosis{Says: says(p)}
	switch {
	case p.Revision == "":
		d.Cause = Elsewhere
	case p.Revision != ranHealthyOn:
		d.Cause = NewSpec
	case p.LostData:
		d.Cause = Lost
	case endsByItself(p) && healthyClaim != "" && p.Claim != "" && p.Claim != healthyClaim:
		d.Cause = Lost
	case endsByItself(p) && p.Restarts >= minRestarts:
		d.Cause = Data
	}
	return d
}

// diagnose is Diagnose of a voter of m, with what m recorded of it.
func diagnose(m *render.EtcdMembership, v render.EtcdMember) Diagnosis {
	return Diagnose(v, m.HealthyRevisions[v.Name], m.HealthyClaims[v.Name])
}

// endsByItself tells whether the member's etcd container is not running
// because it exited with an error of its own: not killed by a signal (the
// kubelet for a failed liveness probe, the kernel for memory), not waiting
// for anything but the kubelet's back-off.
func endsByItself(p render.EtcdPod) bool {
	if p.Running || p.Exit == nil || (p.Waiting != "" && p.Waiting != "CrashLoopBackOff") {
		return false
	}
	return p.Exit.Code > 0 && p.Exit.Code < 128 && p.Exit.Reason != "OOMKilled"
}

// says puts what a pod shows in words.
func says(p render.EtcdPod) string {
	switch {
	case p.Revision == "":
		return "it has no pod"
	case p.Waiting == "Unschedulable":
		return "its pod has no node: " + p.Message
	case p.LostData:
		return "its data directory is empty while etcd lists it as a voter that has run: its data is lost"
	case p.Running:
		return "its etcd container runs but etcd does not answer"
	case p.Exit != nil:
		// Not the count of restarts, which would make a new message, and a
		// new event, of every restart.
		s := fmt.Sprintf("its etcd container exited with code %d (%s)", p.Exit.Code, p.Exit.Reason)
		if words := lastWords(p.Exit.Message); words != "" {
			s += ": " + words
		}
		return s
	case p.Waiting != "":
		return strings.TrimSuffix("its etcd container waits: "+p.Waiting+": "+p.Message, ": ")
	}
	return "its etcd container has not started"
}

// maxWords bounds what a condition quotes of a container's last words.
const maxWords = 300

// lastWords is the telling part of a container's last words (the tail of
// its log, which the kubelet keeps as its termination message): the error
// of the last line etcd logged at level fatal, panic or error (its log
// lines are JSON), otherwise the first line of a Go panic or of the flag
// package's complaint (the start of a stack may be cut off the tail, and
// a frame is no word to quote); bounded, printable.
func lastWords(message string) string {
	lines := strings.Split(message, "\n")
	for _, line := range slices.Backward(lines) {
		var entry struct{ Level, Msg, Error string }
		if json.Unmarshal([]byte(line), &entry) != nil || !slices.Contains([]string{"fatal", "panic", "error"}, entry.Level) {
			continue
		}
		return bounded(strings.TrimSuffix(entry.Msg+": "+entry.Error, ": "))
	}
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "{") || strings.HasPrefix(line, "goroutine ") || strings.HasPrefix(line, "Usage:") {
			continue
		}
		if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") || strings.Contains(line, " flag") {
			return bounded(line)
		}
	}
	return ""
}

func bounded(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, s)
	if r := []rune(s); len(r) > maxWords {
		return string(r[:maxWords]) + "..."
	}
	return s
}

// replacement is the down voter to replace now, and why; false when none
// may be: one whose data etcd refuses (see Diagnose), down for longer than
// ReplaceAfter, or at once when its data is gone for certain (Lost), while
// the healthy voters are a quorum (see keepsQuorum), and the backoff and
// limit allow it (see mayReplace).
func replacement(m *render.EtcdMembership, voters []render.EtcdMember, now time.Time) (render.EtcdMember, string, bool) {
	if !keepsQuorum(voters) {
		return render.EtcdMember{}, "", false
	}
	for _, v := range voters {
		if v.Healthy || v.DownSince.IsZero() {
			continue
		}
		d := diagnose(m, v)
		evidence := d.Cause == Lost || (d.Cause == Data && now.Sub(v.DownSince) > ReplaceAfter)
		if _, _, ok := mayReplace(m.Replacements, v.Name, now); evidence && ok {
			return v, d.Says, true
		}
	}
	return render.EtcdMember{}, "", false
}

// mayReplace tells whether member may be replaced at now, given the
// replacements made before: otherwise when it may (limited false), or that
// it was replaced MaxReplacements times within ReplaceWindow (limited true)
// and may be again only at that time.
func mayReplace(history []render.EtcdReplacement, member string, now time.Time) (time.Time, bool, bool) {
	recent := slices.DeleteFunc(slices.Clone(history), func(r render.EtcdReplacement) bool { return now.Sub(r.At) >= ReplaceWindow })
	var mine []render.EtcdReplacement
	for _, r := range recent {
		if r.Member == member {
			mine = append(mine, r)
		}
	}
	if len(mine) >= MaxReplacements {
		return mine[len(mine)-MaxReplacements].At.Add(ReplaceWindow), true, false
	}
	if len(recent) == 0 {
		return now, false, true
	}
	wait := min(ReplaceBackoff<<(len(recent)-1), ReplaceWindow)
	at := recent[len(recent)-1].At.Add(wait)
	return at, false, !now.Before(at)
}

// downMembers says what keeps the members that are down from coming back,
// once the StatefulSet runs the latest spec it was given (sts): a rollout
// stuck at a member that never ran healthy on the new spec, a member whose
// data etcd refuses but that may not be replaced yet, or a member down for
// longer than ReplaceAfter for a reason outside its data, which the
// controller leaves alone. False when none is down, or none for long.
func downMembers(in render.Input, sts *appsv1.StatefulSet, now time.Time) (readiness.Outcome, bool) {
	m := in.Etcd
	if m == nil || !m.Answered {
		return readiness.Outcome{}, false
	}
	var voters []render.EtcdMember
	for _, member := range m.Members {
		if !member.Learner {
			voters = append(voters, member)
		}
	}
	for _, v := range voters {
		if v.Healthy || v.DownSince.IsZero() {
			continue
		}
		d := diagnose(m, v)
		long := now.Sub(v.DownSince) > ReplaceAfter
		if out, ok := downOutcome(m, voters, v, d, sts, MembersConfigMap(in.ClusterName()), long, now); ok {
			return out, true
		}
	}
	return readiness.Outcome{}, false
}

// downOutcome says what keeps one voter that is down from coming back.
func downOutcome(m *render.EtcdMembership, voters []render.EtcdMember, v render.EtcdMember, d Diagnosis,
	sts *appsv1.StatefulSet, configMap string, long bool, now time.Time,
) (readiness.Outcome, bool) {
	since := v.DownSince.UTC().Format(time.RFC3339)
	switch d.Cause {
	case NewSpec:
		// A pod of an older spec is the StatefulSet's to replace; one of
		// the latest that fails, or does not come up for long, stops the
		// rollout there.
		latest := sts != nil && sts.Status.ObservedGeneration >= sts.Generation && v.Pod.Revision == sts.Status.UpdateRevision
		if !latest || (!long && !failing(v.Pod)) {
			return readiness.Outcome{}, false
		}
		return readiness.Problem(v1alpha1.EtcdRolloutStuckReason,
			"the rollout of etcd stopped at member %s, which never ran healthy on its new pod spec (revision %s): %s; "+
				"no other member is updated, and none is replaced: correct spec.etcd (args, image, version) or put it back",
			v.Name, v.Pod.Revision, d.Says), true
	case Data, Lost:
		if !long && d.Cause != Lost {
			return readiness.Outcome{}, false
		}
		why := fmt.Sprintf("member %s is down since %s on the pod spec it ran healthy on, and its etcd refuses its data: %s", v.Name, since, d.Says)
		switch {
		case v.Pod.LostData:
			why = fmt.Sprintf("member %s is down since %s on the pod spec it ran healthy on: %s", v.Name, since, d.Says)
		case d.Cause == Lost:
			why = fmt.Sprintf("member %s is down since %s on the pod spec it ran healthy on, with a new, empty volume (not the one it ran healthy on): %s", v.Name, since, d.Says)
		}
		at, limited, allowed := mayReplace(m.Replacements, v.Name, now)
		switch {
		case limited:
			return readiness.Problem(v1alpha1.EtcdReplacementLimitReason,
				"%s; it was replaced %d times within %s and is not replaced again before %s: look at its node and volume, "+
					"or remove the annotation %s of ConfigMap %s to allow it now",
				why, MaxReplacements, ReplaceWindow, at.UTC().Format(time.RFC3339), ReplacementsAnnotation, configMap), true
		case !keepsQuorum(voters):
			return readiness.Problem(v1alpha1.EtcdMemberDownReason,
				"%s; it is not replaced while the healthy voters are no quorum of all", why), true
		case allowed:
			return poll(readiness.Waiting(v1alpha1.EtcdMemberDownReason, "%s; it is to be replaced", why)), true
		}
		last := m.Replacements[len(m.Replacements)-1]
		return poll(readiness.Waiting(v1alpha1.EtcdMemberDownReason, "%s; it is replaced at %s, %s after the last replacement (of %s)",
			why, at.UTC().Format(time.RFC3339), at.Sub(last.At), last.Member)), true
	}
	if !long {
		return readiness.Outcome{}, false
	}
	return readiness.Problem(v1alpha1.EtcdMemberDownReason,
		"member %s is down since %s and is not replaced, since nothing says its data is lost: %s", v.Name, since, d.Says), true
}

// failing tells whether a pod shows that its etcd will not come up by
// itself: its container ended, or waits for something other than being
// created.
func failing(p render.EtcdPod) bool {
	return p.Exit != nil || (p.Waiting != "" && p.Waiting != "ContainerCreating" && p.Waiting != "PodInitializing")
}

// keepsQuorum tells whether the healthy voters are a quorum of all the
// voters, those down included: etcd then accepts the removal of one that is
// down, and those that stay are a quorum of what is left. It is never so
// for a single voter, whose data is the only copy.
func keepsQuorum(voters []render.EtcdMember) bool {
	healthy := 0
	for _, v := range voters {
		if v.Healthy {
			healthy++
		}
	}
	return healthy >= len(voters)/2+1
}

// podFacts is what a member's pod shows of it.
func podFacts(p *corev1.Pod) render.EtcdPod {
	facts := render.EtcdPod{Revision: p.Labels[appsv1.ControllerRevisionHashLabelKey]}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			facts.Waiting, facts.Message = c.Reason, c.Message
		}
	}
	for _, c := range p.Status.InitContainerStatuses {
		if c.Name != joinContainerName {
			continue
		}
		ended := c.State.Terminated
		if ended == nil {
			ended = c.LastTerminationState.Terminated
		}
		facts.LostData = ended != nil && ended.ExitCode == join.ExitLostData
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name != "etcd" {
			continue
		}
		facts.Restarts = c.RestartCount
		switch s := c.State; {
		case s.Running != nil:
			facts.Running = true
		case s.Waiting != nil:
			facts.Waiting, facts.Message = s.Waiting.Reason, s.Waiting.Message
		}
		ended := c.State.Terminated
		if ended == nil {
			ended = c.LastTerminationState.Terminated
		}
		if ended != nil {
			facts.Exit = &render.EtcdExit{Code: ended.ExitCode, Reason: ended.Reason, Message: ended.Message}
		}
	}
	return facts
}

// records reads what the controller recorded on the members ConfigMap
// into m. A record it cannot read counts as none: nothing is replaced on it.
func records(m *render.EtcdMembership, cm *corev1.ConfigMap) {
	var healthy, claims map[string]string
	var history []render.EtcdReplacement
	_ = json.Unmarshal([]byte(cm.Annotations[HealthyRevisionsAnnotation]), &healthy)
	_ = json.Unmarshal([]byte(cm.Annotations[HealthyClaimsAnnotation]), &claims)
	if err := json.Unmarshal([]byte(cm.Annotations[ReplacementsAnnotation]), &history); err != nil {
		history = nil
	}
	slices.SortStableFunc(history, func(a, b render.EtcdReplacement) int { return a.At.Compare(b.At) })
	m.HealthyRevisions, m.HealthyClaims, m.Replacements = healthy, claims, history
}

// recordHealthy records, for each member that answers healthy, the
// revision of the pod spec it runs and the claim of its volume, and forgets
// members etcd no longer lists. It writes only when that changes: once per
// member and rollout or new volume.
func (c Component) recordHealthy(ctx context.Context, r client.Reader, in render.Input) error {
	m := in.Etcd
	if m == nil || !m.Answered || c.Writer == nil {
		return nil
	}
	revisions, claims := map[string]string{}, map[string]string{}
	for _, member := range m.Members {
		rev, claim := m.HealthyRevisions[member.Name], m.HealthyClaims[member.Name]
		if member.Healthy && member.Pod.Revision != "" {
			rev = member.Pod.Revision
		}
		if member.Healthy && member.Pod.Claim != "" {
			claim = member.Pod.Claim
		}
		if rev != "" {
			revisions[member.Name] = rev
		}
		if claim != "" {
			claims[member.Name] = claim
		}
	}
	if maps.Equal(revisions, m.HealthyRevisions) && maps.Equal(claims, m.HealthyClaims) {
		return nil
	}
	err := c.annotate(ctx, r, in, map[string]any{HealthyRevisionsAnnotation: revisions, HealthyClaimsAnnotation: claims})
	if apierrors.IsConflict(err) {
		return nil // the ConfigMap changed meanwhile: the next pass, which sees it, records
	}
	return err
}

// recordReplacement records the replacement of member at now, with the
// replacements within ReplaceWindow before it. It is recorded before it is
// made, so that no replacement goes uncounted: one that etcd refuses counts
// too.
func (c Component) recordReplacement(ctx context.Context, r client.Reader, in render.Input, member string, now time.Time) error {
	history := slices.DeleteFunc(slices.Clone(in.Etcd.Replacements), func(r render.EtcdReplacement) bool { return now.Sub(r.At) >= ReplaceWindow })
	return c.annotate(ctx, r, in, map[string]any{ReplacementsAnnotation: append(history, render.EtcdReplacement{Member: member, At: now.UTC().Truncate(time.Second)})})
}

// annotate sets annotations of the members ConfigMap to values in JSON, in
// one write refused when the ConfigMap changed since it was read, so that a
// record is never written over one this pass did not see.
func (c Component) annotate(ctx context.Context, r client.Reader, in render.Input, values map[string]any) error {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: in.Namespace(), Name: MembersConfigMap(in.ClusterName())}, cm); err != nil {
		return fmt.Errorf("read the etcd members ConfigMap: %w", err)
	}
	before := cm.DeepCopy()
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	keys := slices.Sorted(maps.Keys(values))
	for _, key := range keys {
		data, err := json.Marshal(values[key])
		if err != nil {
			return err
		}
		cm.Annotations[key] = string(data)
	}
	if err := c.Writer.Patch(ctx, cm, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("record %s on the etcd members ConfigMap: %w", strings.Join(keys, ", "), err)
	}
	return nil
}
