package controller

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

const auditToken = "s3cr3t-audit-token"

// The token Secret of an audit webhook target in another namespace is read
// only while a ReferenceGrant there allows it, that of the control plane's
// namespace always; what the API servers are held with names the target
// and the Secret, never the token.
func TestAuditTokenFollowsTheReferenceGrantRule(t *testing.T) {
	kinds := observedKinds()
	require.NoError(t, gatewayv1beta1.Install(kinds))
	hcp := controlPlane(func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Deployment.APIServer.Audit = &v1alpha1.Audit{Webhook: &v1alpha1.AuditWebhook{Targets: []v1alpha1.AuditWebhookTarget{
			{Server: "https://own.example.com", Authentication: &v1alpha1.AuditWebhookAuthentication{SecretName: "own"}},
			{Server: "https://unauthenticated.example.com"},
			{Server: "https://audit.example.com", Authentication: &v1alpha1.AuditWebhookAuthentication{SecretName: "audit", SecretNamespace: ptr.To("logging")}},
		}}}
	})
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "own"}, Data: map[string][]byte{"token": []byte("own token")}}
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "logging", Name: "audit"}, Data: map[string][]byte{"token": []byte(auditToken)}}
	grant := &gatewayv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "logging", Name: "audit"},
		Spec: gatewayv1beta1.ReferenceGrantSpec{
			From: []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1beta1.Group(v1alpha1.GroupVersion.Group), Kind: "HostedControlPlane", Namespace: "ns"}},
			To:   []gatewayv1beta1.ReferenceGrantTo{{Kind: "Secret"}},
		},
	}

	s := observedWith(t, fake.NewClientBuilder().WithScheme(kinds).WithObjects(own, token).Build(), hcp)
	held := s.held[v1alpha1.APIServerReadyCondition]
	assert.Equal(t, v1alpha1.RefNotPermittedReason, held.Reason, "%+v", held)
	assert.Contains(t, held.Message, "spec.deployment.apiServer.audit.webhook.targets[2].authentication")
	assert.NotContains(t, held.Message, auditToken)
	assert.Nil(t, s.in.AuditWebhookTokens, "nothing read without a grant")

	s = observedWith(t, fake.NewClientBuilder().WithScheme(kinds).WithObjects(own, token, grant).Build(), hcp)
	assert.NotContains(t, s.held, v1alpha1.APIServerReadyCondition)
	assert.Equal(t, [][]byte{[]byte("own token"), nil, []byte(auditToken)}, s.in.AuditWebhookTokens)

	hcp.Spec.Deployment.APIServer.Audit.Webhook.Targets[2].Authentication.TokenKey = ptr.To("other")
	s = observedWith(t, fake.NewClientBuilder().WithScheme(kinds).WithObjects(own, token, grant).Build(), hcp)
	held = s.held[v1alpha1.APIServerReadyCondition]
	assert.Equal(t, v1alpha1.MountNotFoundReason, held.Reason)
	assert.True(t, strings.HasSuffix(held.Message, "Secret logging/audit has no key other"), held.Message)
}

// A mount whose source does not exist holds the API servers, naming it;
// an optional one does not; the digest follows the content.
func TestMountsAreDigested(t *testing.T) {
	hcp := controlPlane(func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Deployment.APIServer.Mounts = map[string]v1alpha1.Mount{
			"admission": {Path: "/etc/admission", ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "admission"}}},
			"authz":     {Path: "/etc/authz", Secret: &corev1.SecretVolumeSource{SecretName: "authz", Optional: ptr.To(true)}},
		}
	})
	s := observed(t, hcp)
	held := s.held[v1alpha1.APIServerReadyCondition]
	assert.Equal(t, v1alpha1.MountNotFoundReason, held.Reason)
	assert.Equal(t, "spec.deployment.apiServer.mounts[admission]: ConfigMap admission not found in namespace ns; create it or remove the mount", held.Message)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "admission"}, Data: map[string]string{"config.yaml": "a"}}
	s = observed(t, hcp, cm)
	assert.NotContains(t, s.held, v1alpha1.APIServerReadyCondition)
	first := s.in.MountDigests["admission"]
	assert.NotEmpty(t, first)
	assert.Empty(t, s.in.MountDigests["authz"], "optional and missing")
	cm.Data["config.yaml"] = "b"
	assert.NotEqual(t, first, observed(t, hcp, cm).in.MountDigests["admission"])
}

// A new token of the audit webhook rolls the API servers, which read its
// configuration at start only: it is in the digest of the Secrets they
// mount.
func TestNewAuditTokenRollsTheAPIServers(t *testing.T) {
	hcp := controlPlane(func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Deployment.APIServer.Audit = &v1alpha1.Audit{Webhook: &v1alpha1.AuditWebhook{Targets: []v1alpha1.AuditWebhookTarget{{
			Server: "https://audit.example.com", Authentication: &v1alpha1.AuditWebhookAuthentication{SecretName: "audit"},
		}}}}
	})
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "audit"}, Data: map[string][]byte{"token": []byte(auditToken)}}
	first := observed(t, hcp, token).in.SecretDigests["demo-audit"]
	require.NotEmpty(t, first)
	token.Data["token"] = []byte("rotated")
	assert.NotEqual(t, first, observed(t, hcp, token).in.SecretDigests["demo-audit"])
}
