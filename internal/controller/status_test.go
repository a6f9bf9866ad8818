package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
)

// Available is true only when the API server answered in the pass, and on
// every other path false with the reason that keeps it from answering.
func TestAvailable(t *testing.T) {
	now := metav1.Now()
	certsPending := &blockedPhase{v1alpha1.CertificatesReadyCondition, readiness.Outcome{Reason: v1alpha1.IssuingReason, Message: "waiting for cert-manager"}}
	noCertManager := &blockedPhase{v1alpha1.CertificatesReadyCondition, readiness.Outcome{Warn: true, Reason: v1alpha1.CertManagerMissingReason, Message: "install cert-manager"}}
	for name, tc := range map[string]struct {
		s                       scope
		status                  metav1.ConditionStatus
		reason, messageContains string
	}{
		"no cluster": {
			s:      scope{},
			status: metav1.ConditionFalse, reason: v1alpha1.WaitingForClusterReason, messageContains: "waiting for the Cluster",
		},
		"deleting": {
			s:      scope{hcp: &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}},
			status: metav1.ConditionFalse, reason: v1alpha1.DeletingReason, messageContains: "being deleted",
		},
		"answers": {
			s:      scope{cluster: &clusterv1.Cluster{}, probed: true},
			status: metav1.ConditionTrue, reason: v1alpha1.ReadyReason, messageContains: "answers",
		},
		// A phase waits (a certificate issued again) while the API server
		// answers: still Available.
		"answers while a phase waits": {
			s:      scope{cluster: &clusterv1.Cluster{}, probed: true, blocked: certsPending},
			status: metav1.ConditionTrue, reason: v1alpha1.ReadyReason, messageContains: "answers",
		},
		"does not answer": {
			s:      scope{cluster: &clusterv1.Cluster{}, probed: true, answer: errors.New("connection refused")},
			status: metav1.ConditionFalse, reason: v1alpha1.NotAnsweringReason, messageContains: "connection refused",
		},
		"a phase waits before the first answer": {
			s:      scope{cluster: &clusterv1.Cluster{}, blocked: certsPending},
			status: metav1.ConditionFalse, reason: v1alpha1.WaitingReason,
			messageContains: "cannot answer before CertificatesReady: waiting for cert-manager",
		},
		"a bad situation before the first answer": {
			s:      scope{cluster: &clusterv1.Cluster{}, blocked: noCertManager},
			status: metav1.ConditionFalse, reason: v1alpha1.CertManagerMissingReason, messageContains: "install cert-manager",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.s.hcp == nil {
				tc.s.hcp = &v1alpha1.HostedControlPlane{}
			}
			c := available(&tc.s)
			assert.Equal(t, v1alpha1.AvailableCondition, c.Type)
			assert.Equal(t, tc.status, c.Status)
			assert.Equal(t, tc.reason, c.Reason)
			assert.Contains(t, c.Message, tc.messageContains)
		})
	}
}

// The reported volume size is the smallest a member has been given, from
// bound claims only.
func TestSmallestCapacity(t *testing.T) {
	claim := func(size string, phase corev1.PersistentVolumeClaimPhase) corev1.PersistentVolumeClaim {
		c := corev1.PersistentVolumeClaim{}
		c.Status.Phase = phase
		if size != "" {
			c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
		}
		return c
	}
	assert.Nil(t, smallestCapacity(nil), "no etcd yet")
	assert.Nil(t, smallestCapacity([]corev1.PersistentVolumeClaim{claim("", corev1.ClaimPending)}), "nothing bound yet")
	got := smallestCapacity([]corev1.PersistentVolumeClaim{
		claim("8Gi", corev1.ClaimBound), claim("4Gi", corev1.ClaimBound), claim("1Gi", corev1.ClaimPending),
	})
	if assert.NotNil(t, got) {
		assert.Equal(t, "4Gi", got.String())
	}
}
