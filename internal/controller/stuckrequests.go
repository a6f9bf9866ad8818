package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apiutil "github.com/cert-manager/cert-manager/pkg/api/util"
	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// stuckAfter is how long a Certificate issues before its requests are
// looked at.
const stuckAfter = 30 * time.Second

// +kubebuilder:rbac:groups=cert-manager.io,resources=certificaterequests,verbs=list;delete

// unstickIssuances works around what can keep cert-manager from issuing
// the control plane's Certificates (releaseStuckRequests,
// retryFailedIssuances), from one listing of them.
func (r *Reconciler) unstickIssuances(ctx context.Context, s *scope) error {
	certs, err := r.certificates(ctx, s)
	if err != nil {
		return err
	}
	return errors.Join(r.releaseStuckRequests(ctx, s, certs), r.retryFailedIssuances(ctx, s, certs))
}

// releaseStuckRequests deletes the CertificateRequests of the control
// plane's Certificates that cert-manager has not signed after stuckAfter,
// so that it asks again. Every Issuer of a control plane is a CA or
// SelfSigned Issuer in its namespace, which cert-manager signs with at once
// once the request is approved: a request left unsigned that long never
// will be, unless it waits for its Issuer (whose CA Secret is being issued
// too, say). One face was seen: a request whose temporary private key Secret
// (the cert-manager.io/private-key-secret-name annotation) is gone.
// cert-manager makes one when its key manager, behind its own cache, makes
// a second temporary key Secret for a Certificate that keeps its key
// (rotationPolicy Never, as every CA here does) and deletes the first,
// which a request already names: both hold the same key, so cert-manager's
// request manager keeps that request, and a SelfSigned issuer waits for its
// Secret for ever. It was seen under load when a rotation wrote a CA's new
// key into its Secret while the CA's Certificate changed issuer.
//
// Only a Certificate that has been issuing for stuckAfter is looked at (the
// requests are listed from the API server, which costs nothing while none
// is); one that issues for less brings the pass back then.
func (r *Reconciler) releaseStuckRequests(ctx context.Context, s *scope, certs []cmv1.Certificate) error {
	now := time.Now()
	issuing := map[types.UID]bool{}
	for i := range certs {
		since, ok := issuingSince(&certs[i])
		switch {
		case !ok:
		case now.Sub(since) < stuckAfter:
			s.wakeWithin(stuckAfter - now.Sub(since))
		default:
			issuing[certs[i].UID] = true
		}
	}
	if len(issuing) == 0 {
		return nil
	}
	requests := &cmv1.CertificateRequestList{}
	if err := r.apiReader.List(ctx, requests, client.InNamespace(s.hcp.Namespace)); err != nil {
		return fmt.Errorf("list certificate requests: %w", err)
	}
	for i := range requests.Items {
		req := &requests.Items[i]
		owner := metav1.GetControllerOfNoCopy(req)
		if owner == nil || !issuing[owner.UID] || requestDone(req) || now.Sub(req.CreationTimestamp.Time) < stuckAfter {
			continue
		}
		why, err := r.unsigned(ctx, req)
		if err != nil {
			return err
		}
		if why == "" {
			continue
		}
		if err := r.client.Delete(ctx, req, client.Preconditions{UID: &req.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete CertificateRequest %s: %w", req.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("deleted a CertificateRequest left unsigned", "certificateRequest", req.Name, "certificate", owner.Name, "why", why)
		r.recorder.Eventf(s.hcp, req, corev1.EventTypeNormal, v1alpha1.IssuingReason, "ReleaseRequest",
			"deleted CertificateRequest %s of Certificate %s, unsigned after %s: %s; cert-manager asks again",
			req.Name, owner.Name, stuckAfter, why)
	}
	return nil
}

// unsigned says why cert-manager left req unsigned, when nothing else will
// sign it: the private key Secret it names is gone, or its Issuer is ready
// (then what its Ready condition says). Empty when its Issuer is not ready:
// the request waits for it (the CA's Secret not issued yet, say), and one
// asked again would wait the same.
func (r *Reconciler) unsigned(ctx context.Context, req *cmv1.CertificateRequest) (string, error) {
	if secret := req.Annotations[cmv1.CertificateRequestPrivateKeyAnnotationKey]; secret != "" {
		err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: secret}, &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			return "cert-manager replaced the Secret " + secret + " that holds its private key", nil
		}
		if err != nil {
			return "", fmt.Errorf("read Secret %s of CertificateRequest %s: %w", secret, req.Name, err)
		}
	}
	if req.Spec.IssuerRef.Kind != cmv1.IssuerKind {
		return "", nil // not an Issuer of a control plane
	}
	issuer := &cmv1.Issuer{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Spec.IssuerRef.Name}, issuer)
	if apierrors.IsNotFound(err) || err == nil && !apiutil.IssuerHasCondition(issuer, cmv1.IssuerCondition{Type: cmv1.IssuerConditionReady, Status: cmmeta.ConditionTrue}) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read Issuer %s of CertificateRequest %s: %w", req.Spec.IssuerRef.Name, req.Name, err)
	}
	for _, c := range req.Status.Conditions {
		if c.Type == cmv1.CertificateRequestConditionReady {
			return fmt.Sprintf("its Issuer %s is ready, and it says %s: %.200s", issuer.Name, c.Reason, c.Message), nil
		}
	}
	return "its Issuer " + issuer.Name + " is ready, and it has no Ready condition", nil
}

// certificates are the control plane's Certificates (none without
// cert-manager: the PKI phase says so).
func (r *Reconciler) certificates(ctx context.Context, s *scope) ([]cmv1.Certificate, error) {
	certs := &cmv1.CertificateList{}
	err := r.client.List(ctx, certs, client.InNamespace(s.hcp.Namespace), client.MatchingLabels{contract.ControlPlaneLabel: s.hcp.Name})
	if apimeta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list certificates: %w", err)
	}
	return certs.Items, nil
}

// issuingSince is when cert's Issuing condition turned true, if it is.
func issuingSince(cert *cmv1.Certificate) (time.Time, bool) {
	for _, c := range cert.Status.Conditions {
		if c.Type == cmv1.CertificateConditionIssuing && c.Status == cmmeta.ConditionTrue && c.LastTransitionTime != nil {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// issuing tells whether cert-manager is issuing cert.
func issuing(cert *cmv1.Certificate) bool {
	return apiutil.CertificateHasCondition(cert, cmv1.CertificateCondition{Type: cmv1.CertificateConditionIssuing, Status: cmmeta.ConditionTrue})
}

// requestDone tells whether req was signed or has failed or was denied:
// cert-manager takes it from there.
func requestDone(req *cmv1.CertificateRequest) bool {
	for _, c := range req.Status.Conditions {
		if c.Type == cmv1.CertificateRequestConditionReady && (c.Status == cmmeta.ConditionTrue || c.Reason == cmv1.CertificateRequestReasonFailed) {
			return true
		}
		if c.Type == cmv1.CertificateRequestConditionDenied && c.Status == cmmeta.ConditionTrue {
			return true
		}
	}
	return false
}

// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates/status,verbs=patch

// reissueSuperseded asks cert-manager to issue again, as cmctl renew does
// (the Issuing condition, reason ManuallyTriggered), each certificate of
// the CA a that its issuer signed while the CA's Secret held an earlier
// certificate of the same key (render.Authority.Superseded): cert-manager
// renewed the CA or issued it twice in a moment, and a rotation would wait for ever for
// a ca.crt the CA's Secret no longer holds; outside one, the certificates
// keep the control plane's Certificates condition waiting
// (components.SupersededCertificates).
func (r *Reconciler) reissueSuperseded(ctx context.Context, s *scope, a render.Authority) error {
	superseded := a.Superseded(components.CertificatesOf(s.in, a.Issuer()))
	if len(superseded) == 0 {
		return nil
	}
	certs, err := r.certificates(ctx, s)
	if err != nil {
		return err
	}
	for i := range certs {
		cert := &certs[i]
		if !slices.Contains(superseded, cert.Spec.SecretName) || issuing(cert) {
			continue
		}
		if err := r.renew(ctx, s, cert, "issued again: signed while the CA's Secret held an earlier certificate of the same key",
			"its ca.crt is an earlier certificate of the CA's key than Secret "+a.Issuer()+" holds (the CA was renewed, or issued twice)"); err != nil {
			return err
		}
	}
	return nil
}

// renew asks cert-manager to issue cert again now, as cmctl renew does:
// the Issuing condition with reason ManuallyTriggered, which cert-manager
// takes up whatever backoff it keeps; why is its message, and because
// says why in the event.
func (r *Reconciler) renew(ctx context.Context, s *scope, cert *cmv1.Certificate, why, because string) error {
	patch := client.MergeFrom(cert.DeepCopy())
	apiutil.SetCertificateCondition(cert, cert.Generation, cmv1.CertificateConditionIssuing, cmmeta.ConditionTrue, "ManuallyTriggered", why)
	if err := r.client.Status().Patch(ctx, cert, patch); err != nil {
		return fmt.Errorf("ask cert-manager to issue Certificate %s again: %w", cert.Name, err)
	}
	r.recorder.Eventf(s.hcp, cert, corev1.EventTypeNormal, v1alpha1.IssuingReason, "ReissueCertificate",
		"asked cert-manager to issue Certificate %s again: %s", cert.Name, because)
	return nil
}

// Failed issuances are retried at once, not after cert-manager's backoff
// (an hour after the first failure), while the control plane's keys
// rotate: a rotation writes a new key into the Secret of a CA or of the
// service account key while cert-manager may be issuing for it (the CA's
// Certificate changes issuer in the same phase), and cert-manager's key
// manager can then fail an issuance ("CSR not signed by referenced private
// key", seen under load), which the rotation would wait an hour for. A
// Certificate is retried retryFailedAfter after a failure, up to
// retryFailedAttempts failures in a row; after that, cert-manager's
// backoff rules and the Certificates' condition says what failed.
const (
	retryFailedAfter    = 5 * time.Second
	retryFailedAttempts = 5
)

// retryFailedIssuances asks cert-manager to issue again, at once, each
// Certificate of the control plane whose last issuance failed, while any
// rotation that writes keys into Secrets (a CA's, the service account
// key's) is under way.
func (r *Reconciler) retryFailedIssuances(ctx context.Context, s *scope, certs []cmv1.Certificate) error {
	if !writesKeys(s.hcp) {
		return nil
	}
	now := time.Now()
	for i := range certs {
		cert := &certs[i]
		failed, attempts := cert.Status.LastFailureTime, ptr.Deref(cert.Status.FailedIssuanceAttempts, 0)
		if failed == nil || attempts > retryFailedAttempts || issuing(cert) {
			continue
		}
		if wait := retryFailedAfter - now.Sub(failed.Time); wait > 0 {
			s.wakeWithin(wait)
			continue
		}
		if err := r.renew(ctx, s, cert, "issued again at once: the last issuance failed while the control plane's keys rotate",
			fmt.Sprintf("its last issuance failed (%d in a row) while the control plane's keys rotate; cert-manager would wait an hour", attempts)); err != nil {
			return err
		}
	}
	return nil
}

// writesKeys tells whether a rotation that writes a new key into a Secret
// cert-manager issues for (a CA's, the service account key's) is under
// way.
func writesKeys(hcp *v1alpha1.HostedControlPlane) bool {
	if hcp.Status.ServiceAccountKey.Rotation != nil {
		return true
	}
	for _, k := range authorityKinds {
		if k.status(hcp).Rotation != nil {
			return true
		}
	}
	return false
}
