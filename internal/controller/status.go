package controller

import (
	"fmt"
	"strings"
	"sync"

	"github.com/blang/semver/v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/webhooks"
)

// This file is the one place that writes the status: the conditions, each
// from an outcome, and the rest computed at the end of a pass from what the
// pass recorded in its scope.

// ownedConditions are the conditions this controller writes; on a conflict
// the patch helper keeps its own.
func ownedConditions() []string {
	// EtcdRestored too: this controller alone drives restores (restore.go).
	owned := []string{
		v1alpha1.AvailableCondition, v1alpha1.EtcdRestoredCondition, v1alpha1.ImagesAllowedCondition, v1alpha1.CertificatesRenewedCondition,
		v1alpha1.ServiceAccountKeyReadyCondition, v1alpha1.EtcdCAReadyCondition, v1alpha1.FrontProxyCAReadyCondition, v1alpha1.ClusterCAReadyCondition,
	}
	for _, p := range managementPhases(etcd.Component{}) {
		owned = append(owned, p.condition)
	}
	return append(owned, workloadConditions()...)
}

// workloadConditions are the conditions of what is kept inside the workload
// cluster: its phases', and the rewrite of its Secrets (rewriteSecrets).
func workloadConditions() []string {
	var conds []string
	for _, p := range workloadPhases() {
		conds = append(conds, p.condition)
	}
	return append(conds, v1alpha1.EncryptionReadyCondition)
}

// record sets a condition from an outcome. A bad situation is told in a
// Warning event when it is new, not again on every retry of the same one:
// neither when the condition already says it (as after a restart of the
// controller), nor when this controller told it already, which a retry
// soon after may not see in its cached copy of the control plane yet.
func (r *Reconciler) record(hcp *v1alpha1.HostedControlPlane, condition string, out readiness.Outcome) {
	var was metav1.Condition
	if c := conditions.Get(hcp, condition); c != nil {
		was = *c // setCondition changes it in place
	}
	setCondition(hcp, condition, boolStatus(out.Done), out.Reason, out.Message)
	if !out.Warn {
		r.told.forget(hcp.UID, condition)
		return
	}
	if (was.Reason != out.Reason || was.Message != out.Message) && r.told.tell(hcp.UID, condition, out.Reason+": "+out.Message) {
		r.recorder.Eventf(hcp, nil, corev1.EventTypeWarning, out.Reason, condition, out.Message)
	}
}

// imagesAllowed says whether the image overrides of a control plane pull
// from registries the platform allows. One that does not was accepted
// before the list refused it (admission refuses new ones): it keeps
// running as it is, and this says so.
func imagesAllowed(hcp *v1alpha1.HostedControlPlane, allowed contract.Registries) readiness.Outcome {
	if len(allowed) == 0 {
		return readiness.Outcome{
			Done: true, Reason: v1alpha1.AllowedRegistriesReason,
			Message: `the platform allows images from any registry (ALLOWED_IMAGE_REGISTRIES is "*" or empty)`,
		}
	}
	errs := webhooks.DisallowedImages(field.NewPath("spec"), &hcp.Spec.ControlPlaneSettings, allowed)
	if len(errs) == 0 {
		return readiness.Outcome{
			Done: true, Reason: v1alpha1.AllowedRegistriesReason,
			Message: "every image override pulls from a registry the platform allows: " + allowed.String(),
		}
	}
	said := make([]string, 0, len(errs))
	for _, e := range errs {
		said = append(said, e.Field+" "+e.Detail)
	}
	return readiness.Problem(v1alpha1.ImageNotAllowedReason,
		"%s; it was accepted before and keeps running, but a change to another image from a registry not allowed is refused",
		strings.Join(said, "; "))
}

// toldSituations are the bad situations a controller told, by control plane
// and condition.
type toldSituations struct{ m sync.Map }

type toldKey struct {
	uid       types.UID
	condition string
}

// tell records situation and says whether it is new.
func (t *toldSituations) tell(uid types.UID, condition, situation string) bool {
	was, loaded := t.m.Swap(toldKey{uid, condition}, situation)
	return !loaded || was != situation
}

// forget drops what was told of a condition, or with no condition, of
// every condition of a control plane.
func (t *toldSituations) forget(uid types.UID, condition string) {
	if condition != "" {
		t.m.Delete(toldKey{uid, condition})
		return
	}
	t.m.Range(func(k, _ any) bool {
		if k.(toldKey).uid == uid {
			t.m.Delete(k)
		}
		return true
	})
}

// markWaiting says what the phases after the i-th wait for; those that have
// observed something already keep it.
func markWaiting(hcp *v1alpha1.HostedControlPlane, phases []phase, i int) {
	for _, later := range phases[i+1:] {
		if c := conditions.Get(hcp, later.condition); c == nil || c.Reason == v1alpha1.WaitingReason {
			setCondition(hcp, later.condition, metav1.ConditionFalse, v1alpha1.WaitingReason,
				"waiting for "+phases[i].condition)
		}
	}
}

// markUnreachable says that the workload cluster cannot be reached.
func markUnreachable(hcp *v1alpha1.HostedControlPlane, err error) {
	for _, c := range workloadConditions() {
		setCondition(hcp, c, metav1.ConditionFalse, v1alpha1.WorkloadUnreachableReason,
			"cannot reach the workload cluster through Cluster API's cluster cache: "+err.Error())
	}
}

func setCondition(hcp *v1alpha1.HostedControlPlane, t string, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(hcp, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: hcp.Generation,
	})
}

func boolStatus(ok bool) metav1.ConditionStatus {
	if ok {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

// updateStatus computes what the pass recorded into the control plane: the
// endpoint it is served at, and the status.
func updateStatus(s *scope) {
	hcp, st := s.hcp, &s.hcp.Status
	st.ObservedGeneration = hcp.Generation
	st.ExternalManagedControlPlane = ptr.To(true)
	if s.cluster == nil {
		setCondition(hcp, v1alpha1.ClusterReadyCondition, metav1.ConditionFalse, v1alpha1.WaitingForClusterReason,
			"waiting for a Cluster whose spec.controlPlaneRef names this control plane; Cluster API then sets the owner reference")
	}
	// While the first answer since the controller started is awaited, what
	// was said of the API server stands.
	if c := available(s); !s.asking || conditions.Get(hcp, c.Type) == nil {
		setCondition(hcp, c.Type, c.Status, c.Reason, c.Message)
	}
	if s.answered() {
		st.Initialization.ControlPlaneInitialized = ptr.To(true)
	} else if s.held != nil && (s.blocked == nil || !s.blocked.Warn) {
		// Before the API server first answers, the workload conditions say
		// what they wait for (a bad situation says it in its own condition);
		// afterwards they keep what was last observed.
		for _, c := range workloadConditions() {
			if conditions.Get(hcp, c) == nil {
				setCondition(hcp, c, metav1.ConditionFalse, v1alpha1.WaitingForControlPlaneReason,
					"waiting for the API server to answer")
			}
		}
	}
	st.Failing = failing(hcp.Status.Conditions)
	if s.done[v1alpha1.ExposureReadyCondition] {
		// What the user set stays; what was missing is filled in once, when
		// the control plane is first served there.
		hcp.Spec.ControlPlaneEndpoint = s.in.Endpoint
	}
	if k := s.keys; k != nil {
		st.Encryption.Provider, st.Encryption.Key = k.Provider, k.Write
	}
	if rw := s.rewritten; rw != nil {
		st.Encryption.RewrittenWith, st.Encryption.RewrittenAfter = rw.key, rw.after
	}
	st.Rollout.Pending = pendingRollouts(s)
	if s.facts == nil {
		return // no Input: nothing was observed
	}
	st.Selector = s.facts.selector
	if d := s.facts.apiServer; d != nil {
		st.Replicas = ptr.To(d.Status.Replicas)
		st.ReadyReplicas = ptr.To(d.Status.ReadyReplicas)
		st.AvailableReplicas = ptr.To(d.Status.AvailableReplicas)
		st.UpToDateReplicas = ptr.To(d.Status.UpdatedReplicas)
	}
	if pods := s.facts.apiServerPods; pods != nil {
		if version, n := runningVersion(pods.Items); n > 0 {
			st.Versions = []clusterv1.StatusVersion{{Version: version, Replicas: n}}
			st.Version = version //nolint:staticcheck // Cluster API's v1beta1 contract still reads it
		}
	}
	// etcd reports the members etcd lists (as recorded while it does not
	// answer, none of them healthy then) and the smallest volume a member
	// has been given; objects that cannot be read, and an answer of etcd
	// not in yet, keep what was reported before.
	if m := s.in.Etcd; m != nil && !s.etcdAsking {
		st.Etcd.Members = etcd.Members(m)
		if m.Answered {
			st.Etcd.MemberStatuses = etcd.MemberStatuses(m)
			st.Etcd.VolumeUsage = etcd.VolumeUsage(m)
		}
		for i := range st.Etcd.MemberStatuses {
			st.Etcd.MemberStatuses[i].Healthy = st.Etcd.MemberStatuses[i].Healthy && m.Answered
		}
	}
	if s.facts.etcdClaims != nil {
		st.Etcd.VolumeSize = s.in.EtcdVolumeCapacity
	}
}

// failing is the first of conds, as Cluster API orders them (Available
// first, then by name), that is false; nil when none is. Paused is false
// while the control plane is not paused (Cluster API's contract), which is
// how a healthy one is.
func failing(conds []metav1.Condition) *v1alpha1.FailingCondition {
	for _, c := range conds {
		if c.Status == metav1.ConditionFalse && c.Type != clusterv1.PausedCondition {
			return &v1alpha1.FailingCondition{Type: c.Type, Reason: c.Reason}
		}
	}
	return nil
}

// runningVersion is the oldest version a ready API server pod runs, and how
// many are ready. It moves to a new version only once every ready pod runs it.
func runningVersion(pods []corev1.Pod) (string, int32) {
	var oldest *semver.Version
	var raw string
	var n int32
	for i := range pods {
		p := &pods[i]
		v, err := v1alpha1.ParseVersion(p.Labels[contract.VersionLabel])
		if err != nil || !podReady(p) {
			continue
		}
		n++
		if oldest == nil || v.LT(*oldest) {
			oldest, raw = &v, p.Labels[contract.VersionLabel]
		}
	}
	return raw, n
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// available derives the Available condition from what the pass observed:
// true only when the API server answered, and otherwise false with the
// reason that keeps it from answering.
func available(s *scope) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.AvailableCondition, Status: metav1.ConditionFalse}
	switch {
	case !s.hcp.DeletionTimestamp.IsZero():
		c.Reason, c.Message = v1alpha1.DeletingReason, "the control plane is being deleted"
	case s.cluster == nil:
		c.Reason, c.Message = v1alpha1.WaitingForClusterReason, "waiting for the Cluster that owns this control plane"
	case s.answered():
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ReadyReason, "the API server answers through the cluster's kubeconfig"
	case s.probed:
		c.Reason, c.Message = v1alpha1.NotAnsweringReason, "the API server does not answer through the cluster's kubeconfig: "+s.answer.Error()
	case s.blocked != nil:
		c.Reason = v1alpha1.WaitingReason
		if s.blocked.Warn {
			c.Reason = s.blocked.Reason
		}
		c.Message = fmt.Sprintf("the API server cannot answer before %s: %s", s.blocked.condition, s.blocked.Message)
	default:
		c.Reason, c.Message = v1alpha1.WaitingReason, "waiting for the control plane to be reconciled"
	}
	return c
}
