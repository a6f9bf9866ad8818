package envtest

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/utils/ptr"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// auditTarget is an audit webhook target over TLS that keeps the name of
// every ConfigMap whose creation it was posted, by the bearer token it came
// with.
type auditTarget struct {
	*httptest.Server
	mu      sync.Mutex
	created map[string][]string // bearer token -> ConfigMaps
}

func startAuditTarget(t *testing.T) *auditTarget {
	t.Helper()
	a := &auditTarget{created: map[string][]string{}}
	a.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var events auditv1.EventList
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = json.Unmarshal(body, &events)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, e := range events.Items {
			if e.Verb == "create" && e.ObjectRef != nil && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Name != "" {
				token := r.Header.Get("Authorization")
				a.created[token] = append(a.created[token], e.ObjectRef.Name)
			}
		}
	}))
	t.Cleanup(a.Close)
	return a
}

// ca is the PEM of the CA that verifies the target.
func (a *auditTarget) ca() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.Certificate().Raw}))
}

// received says whether the creation of configMap reached the target with
// the token.
func (a *auditTarget) received(token, configMap string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.Contains(a.created[token], configMap) {
		return fmt.Errorf("%s has not received the creation of ConfigMap %s with its token (%d with it, %d tokens)",
			a.URL, configMap, len(a.created[token]), len(a.created))
	}
	return nil
}

// twoAuditTargets gives a running control plane an audit webhook with two
// targets, each with a token: one of a Secret of the control plane's
// namespace, one of another namespace's, which is used only once a
// ReferenceGrant there allows it (until then the API servers are held with
// RefNotPermitted). It returns the targets with their tokens, once the
// API server Deployment has the forwarder that posts to both.
func twoAuditTargets(t *testing.T, hcp *v1alpha1.HostedControlPlane) map[*auditTarget]string {
	t.Helper()
	ctx := testContext(t)
	ns, logging := hcp.Namespace, namespace(t)
	own, platform := startAuditTarget(t), startAuditTarget(t)
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "audit-token"}, Data: map[string][]byte{"token": []byte("token-of-the-tenant")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: logging, Name: "siem"}, Data: map[string][]byte{"bearer": []byte("token-of-the-platform")}},
	} {
		require.NoError(t, env.Client.Create(ctx, s))
	}
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Deployment.APIServer.Audit = &v1alpha1.Audit{
			// Each event is posted as it happens: batch mode would wait up
			// to 30s to fill a batch.
			Mode:   ptr.To(v1alpha1.AuditBlocking),
			Policy: auditv1.Policy{Rules: []auditv1.PolicyRule{{Level: auditv1.LevelMetadata}}},
			Webhook: &v1alpha1.AuditWebhook{Targets: []v1alpha1.AuditWebhookTarget{
				{Server: own.URL + "/events", CertificateAuthority: own.ca(), Authentication: &v1alpha1.AuditWebhookAuthentication{SecretName: "audit-token"}},
				{Server: platform.URL, CertificateAuthority: platform.ca(), Authentication: &v1alpha1.AuditWebhookAuthentication{
					SecretName: "siem", SecretNamespace: &logging, TokenKey: ptr.To("bearer"),
				}},
			}},
		}
	}))
	waitCondition(t, hcp, v1alpha1.APIServerReadyCondition, metav1.ConditionFalse, v1alpha1.RefNotPermittedReason)
	require.NoError(t, env.Client.Create(ctx, &gatewayv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: logging, Name: "audit"},
		Spec: gatewayv1beta1.ReferenceGrantSpec{
			From: []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1beta1.Group(v1alpha1.GroupVersion.Group), Kind: "HostedControlPlane", Namespace: gatewayv1beta1.Namespace(ns)}},
			To:   []gatewayv1beta1.ReferenceGrantTo{{Kind: "Secret", Name: ptr.To(gatewayv1beta1.ObjectName("siem"))}},
		},
	}))
	touch(t, hcp) // the grant is the platform's, which no watch reports
	waitFor(t, "the audit forwarder beside the API server", func() error {
		d := get(t, &appsv1.Deployment{}, ns, hcp.Name+"-apiserver")
		for _, c := range d.Spec.Template.Spec.InitContainers {
			if c.Name == "audit-forwarder" && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				return nil
			}
		}
		return fmt.Errorf("no audit-forwarder container yet")
	})
	return map[*auditTarget]string{own: "Bearer token-of-the-tenant", platform: "Bearer token-of-the-platform"}
}
