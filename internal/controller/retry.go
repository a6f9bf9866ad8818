package controller

import (
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"

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

// retryAfter is how soon a pass that found the API server not answering
// comes back.
func retryAfter(s *scope, now time.Time) time.Duration {
	if s.blocked != nil || ptr.Deref(s.hcp.Status.Initialization.ControlPlaneInitialized, false) {
		return retryInterval
	}
	phases := managementPhases(etcd.Component{})
	last := conditions.Get(s.hcp, phases[len(phases)-1].condition)
	if last != nil && now.Sub(last.LastTransitionTime.Time) < firstAnswerWindow {
		return firstAnswerRetry
	}
	return retryInterval
}
