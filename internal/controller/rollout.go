package controller

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/apply"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/rollout"
)

// SetMustRollInterval sets the least time between the starts of two control
// planes' rollouts of a change a release must roll (MUST_ROLL_INTERVAL).
func (r *Reconciler) SetMustRollInterval(interval time.Duration) {
	r.mustRoll = rollout.NewGate(interval)
}

// rollouts is what a pass learned of the renderings it held back.
type rollouts struct {
	// pending are the workloads this pass held, as the status lists them.
	pending []v1alpha1.PendingRollout
	// kept are the workloads this pass applied or found as rendered.
	kept map[string]bool
	// wake is when the pass should come back for a rollout: when
	// spec.rollout.after is reached, or when the fleet's turn may come.
	wake time.Time
}

func (ro *rollouts) wakeAt(t time.Time) {
	if ro.wake.IsZero() || t.Before(ro.wake) {
		ro.wake = t
	}
}

// holder is the apply.Holder of a pass on one side: a change of a workload's
// pod template that comes from the controller alone waits (see
// internal/rollout), and the pass records what it holds. A rendering held
// in the last pass is held again without asking the API server, so that a
// control plane with one costs no request per pass.
func (r *Reconciler) holder(s *scope, on side) apply.Holder {
	return func(ctx context.Context, current, want *unstructured.Unstructured) (bool, error) {
		if !rollout.Workload(want) || rollout.Started(current, want) {
			return false, nil
		}
		hash, err := rollout.TemplateHash(want)
		if err != nil {
			return false, err
		}
		held := v1alpha1.PendingRollout{
			Object: pendingName(s.hcp, want), TemplateHash: hash,
			RenderedBy: want.GetAnnotations()[rollout.RenderedByAnnotation], MustRoll: rollout.MustRoll(current, want),
		}
		if was := pendingOf(s.hcp, held.Object); was != nil && was.RenderedBy == held.RenderedBy {
			if was.TemplateHash != hash {
				// What the pods depend on changed while the rendering was
				// held: they restart anyway, and take it along.
				return false, nil
			}
			held.Changes = was.Changes
		} else {
			next, err := on.applier.DryRun(ctx, want)
			if err != nil {
				return false, err
			}
			if held.Changes = rollout.Changes(current, next); len(held.Changes) == 0 {
				return false, nil // its own metadata only: nothing restarts
			}
		}
		if held.MustRoll {
			if !settled(s.hcp) {
				// One that was not done before would hold the fleet's turn.
				s.rollouts.wakeAt(time.Now().Add(time.Minute))
			} else if turn, wait := r.mustRoll.Admit(client.ObjectKeyFromObject(s.hcp).String()); turn {
				return false, nil
			} else {
				s.rollouts.wakeAt(time.Now().Add(wait))
			}
		}
		s.rollouts.pending = append(s.rollouts.pending, held)
		return true, nil
	}
}

// settled tells whether the control plane's last pass got through every
// management phase: only such a control plane takes a turn in the fleet's
// rollout of a change that must roll, so that one failing already does not
// hold the others.
func settled(hcp *v1alpha1.HostedControlPlane) bool {
	phases := managementPhases(etcd.Component{})
	return conditions.IsTrue(hcp, phases[len(phases)-1].condition)
}

// keptWorkload records that a pass applied obj, or found it as rendered.
func (s *scope) keptWorkload(obj client.Object) {
	if s.rollouts.kept == nil {
		s.rollouts.kept = map[string]bool{}
	}
	s.rollouts.kept[pendingName(s.hcp, obj)] = true
}

// pendingName names a workload in status.rollout.pending: its kind and
// name, with its namespace when it is not the control plane's (in the
// workload cluster).
func pendingName(hcp *v1alpha1.HostedControlPlane, obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if obj.GetNamespace() == hcp.Namespace || obj.GetNamespace() == "" {
		return kind + " " + obj.GetName()
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// pendingOf is the rollout the status held for object, if any.
func pendingOf(hcp *v1alpha1.HostedControlPlane, object string) *v1alpha1.PendingRollout {
	for i, p := range hcp.Status.Rollout.Pending {
		if p.Object == object {
			return &hcp.Status.Rollout.Pending[i]
		}
	}
	return nil
}

// pendingRollouts is status.rollout.pending after a pass: what it held, and
// what it did not reach (a side it did not keep) as it was.
func pendingRollouts(s *scope) []v1alpha1.PendingRollout {
	pending := slices.Clone(s.rollouts.pending)
	for _, p := range s.hcp.Status.Rollout.Pending {
		if !s.rollouts.kept[p.Object] && !slices.ContainsFunc(pending, func(q v1alpha1.PendingRollout) bool { return q.Object == p.Object }) {
			pending = append(pending, p)
		}
	}
	slices.SortFunc(pending, func(a, b v1alpha1.PendingRollout) int { return strings.Compare(a.Object, b.Object) })
	return pending
}

// tellPending tells in an event what a pass newly holds back, and ends the
// control plane's turn in the fleet's rollout once nothing it must roll is
// held and every management phase is done.
func (r *Reconciler) tellPending(s *scope) {
	var fresh []string
	mustRoll := false
	for _, p := range s.rollouts.pending {
		mustRoll = mustRoll || p.MustRoll
		if pendingOf(s.hcp, p.Object) == nil {
			fresh = append(fresh, p.Object+" ("+strings.Join(p.Changes, ", ")+")")
		}
	}
	if !mustRoll && s.blocked == nil {
		r.mustRoll.Done(client.ObjectKeyFromObject(s.hcp).String())
	}
	if len(fresh) == 0 {
		return
	}
	r.recorder.Eventf(s.hcp, nil, corev1.EventTypeNormal, v1alpha1.RolloutPendingReason, "Hold",
		"this release of the controller renders %s differently; held until the next change of the spec, a version upgrade or spec.rollout.after",
		strings.Join(fresh, "; "))
}

// sooner brings res forward to when the pass should come back for a
// rollout.
func (s *scope) sooner(res ctrl.Result) ctrl.Result {
	if s.rollouts.wake.IsZero() {
		return res
	}
	in := max(time.Until(s.rollouts.wake), time.Second)
	if res.RequeueAfter == 0 || in < res.RequeueAfter {
		res.RequeueAfter = in
		res.Priority = nil // a step that is due, not a look on a timer
	}
	return res
}
