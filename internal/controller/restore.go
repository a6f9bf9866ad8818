package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
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

// recordRestore tells in EtcdRestored how far a restore in place is, as
// etcd's phase said, and ends it once etcd answers with every member it
// was restored with: status.etcd.restoredFrom records it, and the next
// pass starts the API servers again. Once it ended, EtcdRestored keeps
// saying so, even after a pass from a copy older than the end told a step;
// but while a new request is pending, what the backup controller says of it
// stands.
func (r *Reconciler) recordRestore(s *scope) {
	restoring := s.hcp.Status.Etcd.Restoring
	if restoring == nil {
		_, asked := s.hcp.Annotations[v1alpha1.RestoreEtcdAnnotation]
		if from := s.hcp.Status.Etcd.RestoredFrom; from != nil && from.ID != "" && !asked {
			restoredInPlace(s.hcp, from)
		}
		return
	}
	if s.in.ControlPlane == nil || !etcd.Restored(s.in) {
		if c := conditions.Get(s.hcp, v1alpha1.EtcdReadyCondition); c != nil {
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
