package controller

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/apply"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
)

// A bad situation is told once when it begins and again only when it
// changes; progress is never told.
func TestRecordTellsNewSituationsOnce(t *testing.T) {
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{recorder: recorder}
	hcp := &v1alpha1.HostedControlPlane{}
	missing := readiness.Problem(v1alpha1.GatewayNotFoundReason, "Gateway capi-system/capi does not exist")
	noListener := readiness.Problem(v1alpha1.GatewayListenerReason, "the Gateway capi-system/capi has no listener")
	for _, out := range []readiness.Outcome{
		missing, missing, missing, // retries of one situation
		noListener, noListener, // a new one
		readiness.Waiting(v1alpha1.EndpointPendingReason, "waiting for an address"),
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

// Phases run in the order a rollout needs, and every condition the
// controller writes is one it owns, so the patch helper keeps it on a
// conflict.
func TestPhasesAndOwnedConditions(t *testing.T) {
	r := &Reconciler{}
	var order []string
	for _, p := range r.phases() {
		order = append(order, p.condition)
	}
	assert.Equal(t, []string{
		v1alpha1.ClusterReadyCondition, v1alpha1.ExposureReadyCondition, v1alpha1.CertificatesReadyCondition,
		v1alpha1.KubeconfigReadyCondition, v1alpha1.EtcdReadyCondition, v1alpha1.APIServerReadyCondition,
		v1alpha1.ControllersReadyCondition,
	}, order, "etcd before the API servers before the controllers")
	written := append([]string{v1alpha1.AvailableCondition}, order...)
	for _, a := range r.addons() {
		written = append(written, a.condition)
	}
	assert.ElementsMatch(t, written, ownedConditions)
}

// markWaiting tells the later phases what they wait for, but keeps what a
// later phase observed before.
func TestMarkWaitingKeepsObservations(t *testing.T) {
	r := &Reconciler{}
	hcp := &v1alpha1.HostedControlPlane{}
	setCondition(hcp, v1alpha1.APIServerReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason, "rolled out")
	r.markWaiting(hcp, 2) // CertificatesReady is not done
	for _, c := range []string{v1alpha1.KubeconfigReadyCondition, v1alpha1.EtcdReadyCondition, v1alpha1.ControllersReadyCondition} {
		got := conditions.Get(hcp, c)
		if assert.NotNil(t, got, c) {
			assert.Equal(t, v1alpha1.WaitingReason, got.Reason, c)
			assert.Equal(t, "waiting for "+v1alpha1.CertificatesReadyCondition, got.Message, c)
		}
	}
	assert.Equal(t, v1alpha1.ReadyReason, conditions.Get(hcp, v1alpha1.APIServerReadyCondition).Reason)
}

// Errors become the outcome that names the situation, each a bad one that
// is told and retried.
func TestFailureNamesTheSituation(t *testing.T) {
	noMatch := func(group string) error {
		return &apimeta.NoKindMatchError{GroupKind: schema.GroupKind{Group: group, Kind: "Thing"}, SearchedVersions: []string{"v1"}}
	}
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{fmt.Errorf("apply: %w", &apply.ConflictError{Kind: "Service", Namespace: "ns", Name: "demo-apiserver"}), v1alpha1.ConflictReason},
		{noMatch("cert-manager.io"), v1alpha1.CertManagerMissingReason},
		{noMatch("gateway.networking.k8s.io"), v1alpha1.GatewayAPIMissingReason},
		{errors.New("connection refused"), v1alpha1.ApplyFailedReason},
	} {
		out := failure(tc.err)
		assert.True(t, out.Warn, tc.reason)
		assert.False(t, out.Done, tc.reason)
		assert.Equal(t, tc.reason, out.Reason)
	}
}
