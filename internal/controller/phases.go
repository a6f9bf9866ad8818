package controller

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"go.opentelemetry.io/otel/codes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/apply"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/telemetry"
)

// phase is one step of a pass: the neighbouring components of a list that
// share a condition. It is done when each of them is.
type phase struct {
	condition  string
	components []components.Component
}

// phasesOf groups a list of components into phases, in order.
func phasesOf(list []components.Component) []phase {
	var phases []phase
	for _, c := range list {
		if n := len(phases); n > 0 && phases[n-1].condition == c.Condition() {
			phases[n-1].components = append(phases[n-1].components, c)
			continue
		}
		phases = append(phases, phase{condition: c.Condition(), components: []components.Component{c}})
	}
	return phases
}

// managementPhases are the phases of the management side, in the order
// they run; each needs the ones before it done. The first has no
// components: building the Input decides it (see observe). members is the
// etcd component; its zero value names the phases only.
func managementPhases(members etcd.Component) []phase {
	return append([]phase{{condition: v1alpha1.ClusterReadyCondition}}, phasesOf(components.Management(members))...)
}

// workloadPhases are the phases of the workload side; each stands alone.
func workloadPhases() []phase { return phasesOf(components.Workload()) }

// side is a cluster where components are kept.
type side struct {
	// name is management or workload, as the metrics tell them.
	name    string
	applier *apply.Applier
	// ordered: a phase that is not done ends the pass, and the later ones
	// wait for it. Otherwise each phase stands alone.
	ordered bool
	// repairs: an object found deleted or edited is told of in an event.
	repairs bool
}

// management is the management cluster, where the pass keeps a control
// plane's own components in order.
func (r *Reconciler) management() side {
	return side{name: managementSide, applier: r.applier, ordered: true}
}

// run keeps each phase of one side, recording its condition. It returns the
// bad situations of a side whose phases stand alone.
func (r *Reconciler) run(ctx context.Context, s *scope, on side, phases []phase) []error {
	var problems []error
	for i, p := range phases {
		start := time.Now()
		out := r.tracePhase(ctx, s, on, p)
		phaseSeconds.WithLabelValues(on.name, p.condition).Observe(time.Since(start).Seconds())
		r.record(s.hcp, p.condition, out)
		if !on.ordered {
			if out.Warn {
				problems = append(problems, errors.New(p.condition+": "+out.Message))
			}
			continue
		}
		if !out.Done {
			if s.blocked == nil {
				s.blocked = &blockedPhase{condition: p.condition, Outcome: out}
			}
			if startsTogether(s, p.condition, out) {
				continue
			}
			markWaiting(s.hcp, phases, i)
			return nil
		}
		s.done[p.condition] = true
	}
	return problems
}

// startsTogether tells whether, on the management side, the phases after
// one that is not done are kept all the same. It holds on a control plane's
// first start only (it has never answered), so that each component's pods
// are scheduled and started by the time what they connect to answers:
//   - etcd's phase lets the API servers create their Deployment while etcd's
//     pods start, as long as that Deployment does not exist yet; they connect
//     once etcd answers, as after a restart. Once it exists the order holds
//     again: it changes only once etcd is ready, as in an upgrade.
//   - the API servers' phase lets the controllers start once one API server
//     of the control plane's version is ready and none of another version
//     runs, rather than once every API server is: they reach the API servers
//     through their Service, which routes to ready ones only. The controllers
//     never start before that: the controller manager exits when it cannot
//     read the authentication ConfigMap at start, and would then wait out a
//     crash loop's backoff.
//
// It holds only while a phase merely waits: a bad situation still ends the
// pass, and so does every phase before etcd (certificates, kubeconfigs,
// exposure), which the API servers mount. A restore never starts together:
// the API servers must not run before the restored data.
func startsTogether(s *scope, condition string, out readiness.Outcome) bool {
	if out.Warn || s.facts == nil {
		return false
	}
	hcp := s.hcp
	if ptr.Deref(hcp.Status.Initialization.ControlPlaneInitialized, false) ||
		hcp.Spec.Etcd.Restore != nil || hcp.Status.Etcd.Restoring != nil {
		return false
	}
	switch condition {
	case v1alpha1.EtcdReadyCondition:
		return s.facts.apiServer == nil
	case v1alpha1.APIServerReadyCondition:
		return s.facts.apiServerPods != nil && oneReadyOf(s.facts.apiServerPods.Items, hcp.Spec.Version)
	}
	return false
}

// oneReadyOf tells whether at least one of pods is ready and every one that
// is not going away runs version.
func oneReadyOf(pods []corev1.Pod, version string) bool {
	ready := false
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Labels[contract.VersionLabel] != version {
			return false
		}
		ready = ready || podReady(p)
	}
	return ready
}

// tracePhase runs a phase in a span of its own, "phase <condition>", which
// says how far it got.
func (r *Reconciler) tracePhase(ctx context.Context, s *scope, on side, p phase) readiness.Outcome {
	ctx, span := telemetry.Start(ctx, "phase "+p.condition, telemetry.Side.String(on.name), telemetry.Condition.String(p.condition))
	out := r.runPhase(ctx, s, on, p)
	span.SetAttributes(telemetry.Reason.String(out.Reason))
	if out.Warn {
		span.SetStatus(codes.Error, out.Message)
	}
	span.End()
	return out
}

// runPhase keeps the components of a phase in order, unless observation
// decided the phase, and says how far it is. A bad situation ends it.
func (r *Reconciler) runPhase(ctx context.Context, s *scope, on side, p phase) readiness.Outcome {
	if out, held := s.held[p.condition]; held {
		return out
	}
	outs := make([]readiness.Outcome, 0, len(p.components))
	for _, c := range p.components {
		out, err := r.keep(ctx, s, on, c)
		if err != nil {
			s.connectionFailed = s.connectionFailed || on.name == workloadSide && connectionFailed(err)
			out = failure(err)
		}
		if out.Warn {
			return out
		}
		outs = append(outs, out)
	}
	return combine(outs)
}

// combine is the outcome of a phase from those of its components: done when
// each is, otherwise waiting for what those not done wait for.
func combine(outs []readiness.Outcome) readiness.Outcome {
	if len(outs) == 1 {
		return outs[0]
	}
	var waiting, done []readiness.Outcome
	for _, o := range outs {
		if o.Done {
			done = append(done, o)
		} else {
			waiting = append(waiting, o)
		}
	}
	if len(waiting) == 0 {
		return readiness.Ready(messages(done))
	}
	out := waiting[0]
	out.Message = messages(waiting)
	for _, o := range waiting {
		out.Poll = out.Poll || o.Poll
	}
	return out
}

// messages joins the messages that say something.
func messages(outs []readiness.Outcome) string {
	var said []string
	for _, o := range outs {
		if o.Message != "" {
			said = append(said, o.Message)
		}
	}
	return strings.Join(said, "; ")
}

// keep keeps one component on a side: its preflight check, then its
// objects (removed when the spec turns it off), then how far it is.
func (r *Reconciler) keep(ctx context.Context, s *scope, on side, c components.Component) (readiness.Outcome, error) {
	if g, ok := c.(components.Guarded); ok {
		if out, err := g.Preflight(ctx, on.applier.Reader, s.in); err != nil || !out.Done {
			return out, err
		}
	}
	objs, err := c.Render(s.in)
	if err != nil {
		return readiness.Outcome{}, err
	}
	if o, ok := c.(components.Optional); ok && o.Disabled(s.in) {
		for _, obj := range objs {
			if _, err := on.applier.Delete(ctx, obj); err != nil {
				return readiness.Outcome{}, err
			}
		}
		return readiness.Outcome{Done: true, Reason: v1alpha1.DisabledReason, Message: "disabled by the spec; removed from the workload cluster"}, nil
	}
	wrote, err := r.sync(ctx, s, on, c.Condition(), objs)
	if err != nil {
		return readiness.Outcome{}, err
	}
	if p, ok := c.(components.Pruned); ok {
		if err := r.prune(ctx, s, on, p, objs); err != nil {
			return readiness.Outcome{}, err
		}
	}
	s.recordKubeconfig(objs)
	return c.Ready(ctx, on.applier.Reader, s.in, readiness.Applied{Objects: objs, Wrote: wrote})
}

// sync applies objs in order and reports whether it wrote. A conflict or
// failure ends it.
func (r *Reconciler) sync(ctx context.Context, s *scope, on side, condition string, objs []client.Object) (bool, error) {
	// A component applied before whose object is missing was deleted by
	// someone: its recreation is a repair.
	prior := conditions.Get(s.hcp, condition)
	established := prior != nil && (prior.Reason == v1alpha1.ReadyReason || prior.Reason == v1alpha1.ProgressingReason)
	wrote := false
	for _, obj := range objs {
		s.stamp.Apply(obj)
		change, err := on.applier.SyncHeld(ctx, obj, r.holder(s, on))
		if err != nil {
			return wrote, err
		}
		if change != apply.Held {
			s.keptWorkload(obj)
		}
		wrote = wrote || (change != apply.Unchanged && change != apply.Held)
		if !on.repairs {
			continue
		}
		// The repaired object is the event's related object: events about
		// the same objects are counted in one series, others stand apart.
		switch {
		case change == apply.Restored:
			repairs.WithLabelValues(condition, restored).Inc()
			r.recorder.Eventf(s.hcp, obj, corev1.EventTypeNormal, v1alpha1.RepairedReason, "Restore",
				"restored %s in the workload cluster, which had been edited", objectName(obj))
		case change == apply.Created && established:
			repairs.WithLabelValues(condition, recreated).Inc()
			r.recorder.Eventf(s.hcp, obj, corev1.EventTypeNormal, v1alpha1.RepairedReason, "Recreate",
				"recreated %s in the workload cluster, which had been deleted", objectName(obj))
		}
	}
	return wrote, nil
}

func objectName(obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if obj.GetNamespace() == "" {
		return kind + " " + obj.GetName()
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// prune deletes objects of the kinds a component prunes, of its component
// label and owned by the control plane, that it no longer renders among
// objs. The component label keeps one component from pruning what another
// renders; the kind keeps a Deployment or Service from sparing the budget
// of the same name.
func (r *Reconciler) prune(ctx context.Context, s *scope, on side, p components.Pruned, objs []client.Object) error {
	component, kinds := p.Prunes()
	scheme := r.client.Scheme()
	for _, list := range kinds {
		listKind, err := apiutil.GVKForObject(list, scheme)
		if err != nil {
			return err
		}
		kind := strings.TrimSuffix(listKind.Kind, "List")
		keep := map[string]bool{}
		for _, o := range objs {
			gvk, err := apiutil.GVKForObject(o, scheme)
			if err != nil {
				return err
			}
			if gvk.Group == listKind.Group && gvk.Kind == kind {
				keep[o.GetName()] = true
			}
		}
		if _, err := on.applier.Prune(ctx, list, s.hcp.UID, keep, client.InNamespace(s.hcp.Namespace),
			client.MatchingLabels{contract.ControlPlaneLabel: s.hcp.Name, contract.ComponentLabel: component}); err != nil {
			return err
		}
	}
	return nil
}

// recordKubeconfig keeps the admin kubeconfig among objs, which the probe
// then asks with: the one this pass wrote.
func (s *scope) recordKubeconfig(objs []client.Object) {
	for _, obj := range objs {
		if secret, ok := obj.(*corev1.Secret); ok && secret.Name == contract.ClusterKubeconfigName(s.cluster.Name) {
			s.kubeconfig = secret.Data["value"]
		}
	}
}

// connectionFailed tells whether err is a request that did not reach the
// API server, or that it refused to authenticate: what a connection gets
// whose credentials or CA were rotated under it.
func connectionFailed(err error) bool {
	var transport *url.Error
	return errors.As(err, &transport) || apierrors.IsUnauthorized(err)
}

// failure turns an error into the outcome that explains it.
func failure(err error) readiness.Outcome {
	var conflict *apply.ConflictError
	switch {
	case errors.As(err, &conflict):
		return readiness.Problem(v1alpha1.ConflictReason, "%v", err)
	case apimeta.IsNoMatchError(err) && strings.Contains(err.Error(), cmv1.SchemeGroupVersion.Group):
		return readiness.Problem(v1alpha1.CertManagerMissingReason, "cert-manager's CRDs are not installed: install cert-manager (v1.21 or later); retrying")
	case apimeta.IsNoMatchError(err) && strings.Contains(err.Error(), gatewayv1.GroupName):
		return readiness.Problem(v1alpha1.GatewayAPIMissingReason, "Gateway API CRDs (Gateway, TLSRoute v1) are not installed; install them or remove spec.gateway")
	default:
		return readiness.Problem(v1alpha1.ApplyFailedReason, "%v", err)
	}
}
