package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/backup"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// etcdClients are the components that reach etcd, directly or through the
// API server: a restore in place stops them before etcd, and starts them
// again after it.
var etcdClients = []struct {
	component components.Component
	label     string
}{
	{components.APIServer{}, contract.APIServerComponent},
	{components.ControllerManager{}, contract.ControllerManagerComponent},
	{components.Scheduler{}, contract.SchedulerComponent},
}

// stopForRestore keeps, while etcd is restored in place, the API servers,
// controller-manager and scheduler at no replicas, ahead of the phases that
// would keep them after etcd's; until their pods are gone etcd's phase
// waits, and no member stops.
func (r *Reconciler) stopForRestore(ctx context.Context, s *scope) {
	if s.in.ControlPlane == nil || !s.in.RestoringEtcd() {
		return
	}
	left := 0
	for _, c := range etcdClients {
		if _, err := r.keep(ctx, s, r.management(), c.component); err != nil {
			s.held[v1alpha1.EtcdReadyCondition] = failure(err)
			return
		}
		pods := &corev1.PodList{}
		if err := r.client.List(ctx, pods, client.InNamespace(s.in.Namespace()), client.MatchingLabels(s.in.Selector(c.label))); err != nil {
			s.held[v1alpha1.EtcdReadyCondition] = failure(err)
			return
		}
		left += len(pods.Items)
	}
	if left > 0 {
		s.held[v1alpha1.EtcdReadyCondition] = readiness.Waiting(v1alpha1.StoppingForRestoreReason,
			"stopping the API servers, controller-manager and scheduler (%d pods left) before etcd is restored from %s",
			left, s.hcp.Status.Etcd.Restoring.Key)
	}
}

// restorer is what this reconciler asks of package backup for a restore
// (backup.Restorer): to find the snapshot and give it to the members in the
// restore Secret. This reconciler owns every restore: it alone writes
// EtcdRestored and status.etcd.restoring and restoredFrom.
type restorer interface {
	Prepare(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string, req backup.Request) (string, error)
	Restored(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string) (string, error)
}

// restorePoll is how soon a pass comes back while a restore waits for what
// no watch reports: the store, or the URL's renewal. A pass that ends in a
// bad situation comes back with controller-runtime's backoff instead, at
// most 1000 s apart: within the half of backup.RestoreURLExpiry a URL has
// left when it is due for renewal.
const restorePoll = 10 * time.Second

// restore drives the restores of a control plane, after its phases: the one
// spec.etcd.restore asks for until etcd answers, and one in place from the
// request of the restore-etcd annotation until etcd answers with every
// member restored. Once a restore in place ended, EtcdRestored keeps saying
// so, even after a pass from a copy older than the end told a step.
func (r *Reconciler) restore(ctx context.Context, s *scope) {
	_, asked := s.hcp.Annotations[v1alpha1.RestoreEtcdAnnotation]
	switch st := s.hcp.Status.Etcd; {
	case s.hcp.Spec.Etcd.Restore != nil && st.RestoredFrom == nil:
		r.restoreAtCreation(ctx, s)
	case st.Restoring != nil:
		r.restoreInPlace(ctx, s, asked)
	case asked:
		r.takeRestore(ctx, s)
	case st.RestoredFrom != nil && st.RestoredFrom.ID != "":
		restoredInPlace(s.hcp, st.RestoredFrom)
	}
}

// restoreAtCreation has the restore Secret name the snapshot every member
// restores before etcd first starts, until etcd answered; then
// status.etcd.restoredFrom records it.
func (r *Reconciler) restoreAtCreation(ctx context.Context, s *scope) {
	cluster := s.cluster.Name
	key, err := r.restorer.Restored(ctx, s.hcp, cluster)
	if err == nil && key != "" {
		from := &v1alpha1.EtcdRestoredFrom{Key: key, Revision: contract.EtcdSnapshotRevision(key)}
		s.hcp.Status.Etcd.RestoredFrom = from
		r.setRestored(s.hcp, metav1.ConditionTrue, v1alpha1.ReadyReason,
			fmt.Sprintf("etcd was restored from %s (revision %d, bumped by %d)", key, from.Revision, contract.EtcdRevisionBump), corev1.EventTypeNormal)
		return
	}
	s.soon = restorePoll
	if err == nil {
		key, err = r.restorer.Prepare(ctx, s.hcp, cluster, backup.AtCreation(s.hcp, cluster))
	}
	if err != nil {
		r.setRestored(s.hcp, metav1.ConditionFalse, backup.Reason(err), "etcd does not start until its snapshot is found: "+err.Error(), corev1.EventTypeWarning)
		return
	}
	r.setRestored(s.hcp, metav1.ConditionFalse, v1alpha1.RestorePendingReason, fmt.Sprintf("every etcd member restores %s before it first starts", key), "")
}

// takeRestore takes the request of the restore-etcd annotation: it has the
// restore Secret name the snapshot for a new restore ID and records the
// restore in status.etcd.restoring, from which the next passes stop the
// control plane and restore etcd. The annotation is removed in a later
// pass, once the status is stored, so a request is never lost; and never
// taken twice, since a pass from a cached copy that does not show the
// restore yet finds it in the stored one. A snapshot that cannot be had
// stops nothing: EtcdRestored says why, and it is tried again until the
// annotation is removed.
func (r *Reconciler) takeRestore(ctx context.Context, s *scope) {
	stored := &v1alpha1.HostedControlPlane{}
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(s.hcp), stored); err != nil || stored.Status.Etcd.Restoring != nil {
		s.soon = time.Second
		return
	}
	id := time.Now().UTC().Format("20060102T150405Z")
	req := backup.InPlace(s.hcp, s.cluster.Name, s.hcp.Annotations[v1alpha1.RestoreEtcdAnnotation], id)
	key, err := r.restorer.Prepare(ctx, s.hcp, s.cluster.Name, req)
	if err != nil {
		s.soon = retryInterval
		r.setRestored(s.hcp, metav1.ConditionFalse, backup.Reason(err), fmt.Sprintf("etcd is not restored in place, and nothing was stopped: %v; "+
			"it is tried again until the annotation %s is removed", err, v1alpha1.RestoreEtcdAnnotation), corev1.EventTypeWarning)
		return
	}
	s.soon = time.Second
	s.hcp.Status.Etcd.Restoring = &v1alpha1.EtcdRestoring{ID: id, Key: key}
	r.setRestored(s.hcp, metav1.ConditionFalse, v1alpha1.StoppingForRestoreReason,
		fmt.Sprintf("etcd is restored in place from %s (restore %s): the API servers, controller-manager and scheduler stop first, then every etcd member", key, id),
		corev1.EventTypeNormal)
}

// restoreInPlace keeps a restore in place going: it removes the request
// taken, keeps the restore Secret's URL valid, tells in EtcdRestored how far
// the restore is, as etcd's phase said, and ends it once etcd answers with
// every member it was restored with (and the request is gone):
// status.etcd.restoredFrom records it, and the next pass starts the API
// servers again.
func (r *Reconciler) restoreInPlace(ctx context.Context, s *scope, asked bool) {
	restoring := s.hcp.Status.Etcd.Restoring
	delete(s.hcp.Annotations, v1alpha1.RestoreEtcdAnnotation)
	req := backup.InPlace(s.hcp, s.cluster.Name, restoring.Key, restoring.ID)
	if _, err := r.restorer.Prepare(ctx, s.hcp, s.cluster.Name, req); err != nil {
		s.soon = retryInterval
		r.recorder.Eventf(s.hcp, nil, corev1.EventTypeWarning, backup.Reason(err), "Restore",
			"the restore Secret of restore %s cannot be written: %v", restoring.ID, err)
	}
	if asked || s.in.ControlPlane == nil || !etcd.Restored(s.in) {
		// EtcdReady tells the restore's steps; what else it waits for is not
		// the restore's.
		if c := conditions.Get(s.hcp, v1alpha1.EtcdReadyCondition); c != nil &&
			(c.Reason == v1alpha1.StoppingForRestoreReason || c.Reason == v1alpha1.RestoringReason) {
			conditions.Set(s.hcp, metav1.Condition{
				Type: v1alpha1.EtcdRestoredCondition, Status: metav1.ConditionFalse, Reason: c.Reason, Message: c.Message, ObservedGeneration: s.hcp.Generation,
			})
		}
		return
	}
	from := &v1alpha1.EtcdRestoredFrom{Key: restoring.Key, Revision: contract.EtcdSnapshotRevision(restoring.Key), ID: restoring.ID}
	s.hcp.Status.Etcd.RestoredFrom = from
	s.hcp.Status.Etcd.Restoring = nil
	r.recorder.Eventf(s.hcp, nil, corev1.EventTypeNormal, v1alpha1.ReadyReason, "Restore", "%s", restoredInPlace(s.hcp, from))
}

// setRestored sets EtcdRestored and, when its message changes, tells it in
// an event of eventType (none when empty).
func (r *Reconciler) setRestored(hcp *v1alpha1.HostedControlPlane, status metav1.ConditionStatus, reason, msg, eventType string) {
	if c := conditions.Get(hcp, v1alpha1.EtcdRestoredCondition); eventType != "" && (c == nil || c.Message != msg) {
		r.recorder.Eventf(hcp, nil, eventType, reason, "Restore", "%s", msg)
	}
	conditions.Set(hcp, metav1.Condition{
		Type: v1alpha1.EtcdRestoredCondition, Status: status, Reason: reason, Message: msg, ObservedGeneration: hcp.Generation,
	})
}

// restoredInPlace sets EtcdRestored for the restore in place that ended, and
// returns what it says.
func restoredInPlace(hcp *v1alpha1.HostedControlPlane, from *v1alpha1.EtcdRestoredFrom) string {
	msg := fmt.Sprintf("etcd was restored in place from %s (revision %d, bumped by %d); the API servers, controller-manager and scheduler start again",
		from.Key, from.Revision, contract.EtcdRevisionBump)
	conditions.Set(hcp, metav1.Condition{
		Type: v1alpha1.EtcdRestoredCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.ReadyReason, Message: msg, ObservedGeneration: hcp.Generation,
	})
	return msg
}
