package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/refgrant"
)

// observeAuditTokens reads the bearer token of each audit webhook target
// that has one, from the Secret its authentication names: in another
// namespace only while a ReferenceGrant there allows it, checked before
// anything of the Secret is read, at every pass. The tokens go into the
// targets' kubeconfigs and nowhere else: messages name the Secret and its
// key, never what it holds. While one is missing the API servers keep
// running as they are. A new token rolls them at the next pass (the Secret
// is the user's, read but not watched).
func (r *Reconciler) observeAuditTokens(ctx context.Context, cp *v1alpha1.HostedControlPlane, o *render.Observed) (readiness.Outcome, bool) {
	audit := cp.Spec.Deployment.APIServer.Audit
	if audit == nil || audit.Webhook == nil {
		return readiness.Outcome{}, false
	}
	tokens := make([][]byte, len(audit.Webhook.Targets))
	for i, target := range audit.Webhook.Targets {
		if target.Authentication == nil {
			continue
		}
		field := fmt.Sprintf("spec.deployment.apiServer.audit.webhook.targets[%d].authentication", i)
		token, out, held := r.observeAuditToken(ctx, cp, field, target.Authentication)
		if held {
			return out, true
		}
		tokens[i] = token
	}
	o.AuditWebhookTokens = tokens
	return readiness.Outcome{}, false
}

func (r *Reconciler) observeAuditToken(ctx context.Context, cp *v1alpha1.HostedControlPlane, field string, auth *v1alpha1.AuditWebhookAuthentication) ([]byte, readiness.Outcome, bool) {
	key := client.ObjectKey{Namespace: ptr.Deref(auth.SecretNamespace, cp.Namespace), Name: auth.SecretName}
	err := refgrant.Check(ctx, r.apiReader, cp.Namespace, refgrant.Target{Kind: "Secret", Namespace: key.Namespace, Name: key.Name})
	switch {
	case errors.Is(err, refgrant.ErrNotPermitted):
		return nil, readiness.Problem(v1alpha1.RefNotPermittedReason, "%s: %v", field, err), true
	case err != nil:
		return nil, failure(err), true
	}
	secret := &corev1.Secret{}
	if err := r.apiReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, readiness.Problem(v1alpha1.MountNotFoundReason, "%s: Secret %s not found", field, key), true
		}
		return nil, failure(fmt.Errorf("read Secret %s of %s: %w", key, field, err)), true
	}
	tokenKey := ptr.Deref(auth.TokenKey, v1alpha1.DefaultAuditTokenKey)
	token := secret.Data[tokenKey]
	if len(token) == 0 {
		return nil, readiness.Problem(v1alpha1.MountNotFoundReason, "%s: Secret %s has no key %s", field, key, tokenKey), true
	}
	return token, readiness.Outcome{}, false
}
