package controller

import (
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
)

// firstAnswerWindow is how long after its last phase is done a control
// plane that has never answered is asked again every firstAnswerRetry: its
// API servers are ready, and what remains is the path to them (a Service's
// load balancer and kube-proxy's rules, or a Gateway's route), which is
// programmed within seconds; no event tells of it. Past the window it is
// asked every retryInterval, so that one that never answers costs little.
const (
	firstAnswerWindow = time.Minute
	firstAnswerRetry  = time.Second
)

// retryAfter is when a pass that found the API server not answering comes
// back: within the first answer's window soon, otherwise in the background.
func retryAfter(s *scope, now time.Time) ctrl.Result {
	if s.blocked != nil || ptr.Deref(s.hcp.Status.Initialization.ControlPlaneInitialized, false) {
		return background(retryInterval)
	}
	phases := managementPhases(etcd.Component{})
	last := conditions.Get(s.hcp, phases[len(phases)-1].condition)
	if last != nil && now.Sub(last.LastTransitionTime.Time) < firstAnswerWindow {
		return ctrl.Result{RequeueAfter: firstAnswerRetry}
	}
	return background(retryInterval)
}

// background comes back after d at the queue's low priority: a pass that
// only looks again, with nothing changed that it knows of, yields to every
// pass an event brought (a spec change, an object of the control plane, a
// probe's new answer), which come at the normal priority. When many control
// planes stop answering at once, their passes every retryInterval then
// never hold back a healthy control plane's change; an event for a control
// plane waiting in the background raises it to the normal priority.
func background(d time.Duration) ctrl.Result {
	return ctrl.Result{RequeueAfter: d, Priority: ptr.To(handler.LowPriority)}
}
