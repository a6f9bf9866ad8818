package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/client-go/tools/events"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// A bad situation is told once when it begins and again only when it
// changes; progress is never told.
func TestRecordTellsNewSituationsOnce(t *testing.T) {
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{recorder: recorder}
	hcp := &v1alpha1.HostedControlPlane{}
	missing := problem(v1alpha1.GatewayNotFoundReason, "Gateway capi-system/capi does not exist")
	noListener := problem(v1alpha1.GatewayListenerReason, "the Gateway capi-system/capi has no listener")
	for _, out := range []outcome{
		missing, missing, missing, // retries of one situation
		noListener, noListener, // a new one
		waiting(v1alpha1.EndpointPendingReason, "waiting for an address"),
		missing, // back again
	} {
		r.record(hcp, v1alpha1.ExposureReadyCondition, out)
	}
	close(recorder.Events)
	var told []string
	for e := range recorder.Events {
		told = append(told, e)
	}
	assert.Equal(t, []string{
		"Warning GatewayNotFound Gateway capi-system/capi does not exist",
		"Warning GatewayListenerMissing the Gateway capi-system/capi has no listener",
		"Warning GatewayNotFound Gateway capi-system/capi does not exist",
	}, told)
}
