package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
)

// A control plane whose phases are all done but which never answered is
// asked again every second for a minute, then every retryInterval in the
// background (low priority); one that answered before, or waits for a
// phase, every retryInterval in the background.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration, initialized bool, blocked *blockedPhase) *scope {
		hcp := &v1alpha1.HostedControlPlane{}
		hcp.Status.Conditions = []metav1.Condition{{
			Type: v1alpha1.ControllersReadyCondition, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-ago)),
		}}
		if initialized {
			hcp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
		}
		return &scope{hcp: hcp, blocked: blocked}
	}
	soon := ctrl.Result{RequeueAfter: firstAnswerRetry}
	later := ctrl.Result{RequeueAfter: retryInterval, Priority: ptr.To(handler.LowPriority)}
	assert.Equal(t, soon, retryAfter(at(0, false, nil), now))
	assert.Equal(t, soon, retryAfter(at(59*time.Second, false, nil), now))
	assert.Equal(t, later, retryAfter(at(2*time.Minute, false, nil), now))
	assert.Equal(t, later, retryAfter(at(0, true, nil), now))
	assert.Equal(t, later, retryAfter(at(0, false, &blockedPhase{condition: v1alpha1.EtcdReadyCondition, Outcome: readiness.Outcome{Poll: true}}), now))
	assert.Equal(t, later, retryAfter(&scope{hcp: &v1alpha1.HostedControlPlane{}}, now), "no phase recorded yet")
}
