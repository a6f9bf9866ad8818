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

// observeAuditToken reads the bearer token of the audit webhook target,
// from the Secret its authentication names: in another namespace only
// while a ReferenceGrant there allows it, checked before anything of the
// Secret is read, at every pass. The token goes into the API server's
// webhook configuration and nowhere else: messages name the Secret and
// its key, never what it holds. Without it the API servers keep running
// as they are. A new token rolls them at the next pass (the Secret is the
// user's, read but not watched).
func (r *Reconciler) observeAuditToken(ctx context.Context, cp *v1alpha1.HostedControlPlane, o *render.Observed) (readiness.Outcome, bool) {
	audit := cp.Spec.Deployment.APIServer.Audit
	if audit == nil || audit.Webhook == nil || len(audit.Webhook.Targets) == 0 || audit.Webhook.Targets[0].Authentication == nil {
		return readiness.Outcome{}, false
	}
	auth := audit.Webhook.Targets[0].Authentication
	const field = "spec.deployment.apiServer.audit.webhook.targets[0].authentication"
	key := client.ObjectKey{Namespace: ptr.Deref(auth.SecretNamespace, cp.Namespace), Name: auth.SecretName}
	err := refgrant.Check(ctx, r.apiReader, cp.Namespace, refgrant.Target{Kind: "Secret", Namespace: key.Namespace, Name: key.Name})
	switch {
	case errors.Is(err, refgrant.ErrNotPermitted):
		return readiness.Problem(v1alpha1.RefNotPermittedReason, "%s: %v", field, err), true
	case err != nil:
		return failure(err), true
	}
	secret := &corev1.Secret{}
	if err := r.apiReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return readiness.Problem(v1alpha1.MountNotFoundReason, "%s: Secret %s not found", field, key), true
		}
		return failure(fmt.Errorf("read Secret %s of %s: %w", key, field, err)), true
	}
	tokenKey := ptr.Deref(auth.TokenKey, v1alpha1.DefaultAuditTokenKey)
	token := secret.Data[tokenKey]
	if len(token) == 0 {
		return readiness.Problem(v1alpha1.MountNotFoundReason, "%s: Secret %s has no key %s", field, key, tokenKey), true
	}
	o.AuditWebhookToken = token
	return readiness.Outcome{}, false
}
