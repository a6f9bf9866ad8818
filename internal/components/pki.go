package components

import (
	"context"
	"fmt"
	"strings"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
)

// PKI is the control plane's cert-manager PKI: the roots it owns (a
// self-signed cluster CA, the etcd and front-proxy CAs it signs, the service
// account key) and, issued with them, the certificates each component
// defines for itself. Every certificate is issued before any pod that
// mounts one starts, so they are applied, and waited for, together.
type PKI struct{}

// Name names its golden file.
func (PKI) Name() string { return "pki" }

// Condition reports it.
func (PKI) Condition() string { return v1alpha1.CertificatesReadyCondition }

// Render renders the roots, then the certificates of the components. Their
// order is the order the golden files pin (and the order the condition
// lists the ones still pending).
func (PKI) Render(in render.Input) ([]client.Object, error) {
	objs := roots(in)
	for _, part := range certifiedParts() {
		for _, c := range part.Certificates(in) {
			objs = append(objs, c)
		}
	}
	return objs, nil
}

// certified is a part of the control plane with certificates of its own.
type certified interface {
	Certificates(in render.Input) []*cmv1.Certificate
}

// certifiedParts are the parts with certificates, in the order the golden
// files pin.
func certifiedParts() []certified {
	return []certified{
		ClusterKubeconfig{}, APIServer{}, etcd.Component{}, ControllerManager{}, Scheduler{}, konnectivityServer{}, tunnelServer{},
	}
}

// roots are the certificate authorities, each with the Issuer that signs
// with it, and the service account key. CA keys survive renewal, so a
// renewed CA still verifies every certificate it signed. The cluster CA is
// a root; the etcd and front proxy CAs are signed by the cluster CA until
// their first rotation, and roots of their own after (see render.Authority).
// A CA's Cross, which the controller writes, has an Issuer while it issues
// certificates: the cluster CA's once a rotation made it, the etcd CA's
// during a cross-signed rotation.
func roots(in render.Input) []client.Object {
	lifetimes := in.Lifetimes()
	selfSigned := in.Name("selfsigned")
	objs := []client.Object{in.Issuer(selfSigned, cmv1.IssuerConfig{SelfSigned: &cmv1.SelfSignedIssuer{}})}
	for _, a := range in.Authorities() {
		issuer, lifetime := in.CASecret(), lifetimes.CA
		if a.SelfSigned() {
			issuer = selfSigned
		}
		if a.Root() {
			lifetime = lifetimes.RootCA
		}
		objs = append(objs, ca(in, a.Secret, a.CommonName, issuer, lifetime), caIssuer(in, a.Secret))
		if a.Rotation() != nil {
			// The new CA, a root of its own, until it replaces the old one.
			objs = append(objs, ca(in, a.Next, a.CommonName, selfSigned, lifetime), caIssuer(in, a.Next))
		}
		if a.ServingIssuer() == a.Cross {
			objs = append(objs, caIssuer(in, a.Cross))
		}
	}
	objs = append(objs, serviceAccountKey(in, in.SASecret()))
	if in.ControlPlane.Status.ServiceAccountKey.Rotation != nil {
		// The new key, until it replaces the old one.
		objs = append(objs, serviceAccountKey(in, in.SANextSecret()))
	}
	return objs
}

func ca(in render.Input, secret, commonName, issuer string, duration time.Duration) *cmv1.Certificate {
	c := in.Certificate(secret, issuer, commonName, cmv1.UsageCertSign, cmv1.UsageCRLSign, cmv1.UsageDigitalSignature)
	c.Spec.IsCA = true
	c.Spec.Duration = &metav1.Duration{Duration: duration}
	c.Spec.PrivateKey.RotationPolicy = cmv1.RotationPolicyNever
	return c
}

// caIssuer signs with the CA in the Secret of the same name.
func caIssuer(in render.Input, secret string) *cmv1.Issuer {
	return in.Issuer(secret, cmv1.IssuerConfig{CA: &cmv1.CAIssuer{SecretName: secret}})
}

// serviceAccountKey signs service account tokens (the API server) and is
// mounted by the controller manager; it survives renewal, so tokens stay
// valid. cert-manager keeps the key it finds in the Secret (rotationPolicy
// Never), which is how the new key of a rotation replaces the old one in
// <cluster>-sa: the controller writes it there, and cert-manager issues a
// certificate for it.
func serviceAccountKey(in render.Input, secret string) *cmv1.Certificate {
	sa := in.Leaf(secret, in.CASecret(), "service-accounts", nil, cmv1.UsageDigitalSignature)
	sa.Spec.PrivateKey.RotationPolicy = cmv1.RotationPolicyNever
	return sa
}

// Ready is done when cert-manager has issued every certificate for its
// current spec and the controller has seen its Secret.
func (PKI) Ready(ctx context.Context, c client.Reader, in render.Input, applied readiness.Applied) (readiness.Outcome, error) {
	var pending []string
	total := 0
	for _, obj := range applied.Objects {
		want, ok := obj.(*cmv1.Certificate)
		if !ok {
			continue
		}
		total++
		cert := &cmv1.Certificate{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(want), cert); err != nil || !certificateReady(cert) {
			pending = append(pending, want.Name)
			continue
		}
		if _, seen := in.SecretDigests[want.Spec.SecretName]; !seen {
			pending = append(pending, want.Name)
		}
	}
	if len(pending) > 0 {
		return readiness.Waiting(v1alpha1.IssuingReason, "waiting for cert-manager to issue %d of %d certificates: %s",
			len(pending), total, strings.Join(pending, ", ")), nil
	}
	if stale := SupersededCertificates(in); len(stale) > 0 {
		return readiness.Waiting(v1alpha1.IssuingReason, "waiting for cert-manager to issue again the certificates signed while "+
			"their CA's Secret held an earlier certificate of the same key: %s", strings.Join(stale, ", ")), nil
	}
	return readiness.Ready(fmt.Sprintf("all %d certificates issued", total)), nil
}

// SupersededCertificates are the Secrets of the certificates that hold, as
// ca.crt, an earlier certificate of their CA's key than the CA's Secret
// holds (render.Authority.Superseded): cert-manager sometimes issues a CA
// twice in a moment (seen when a control plane is created under load, the
// second time before its cache holds the Secret of the first), and a
// certificate signed between the two keeps the first. It verifies as well
// (the same key signed it), but once renewed its ca.crt changes, which
// would roll the pods that read it at start at that renewal. So they are
// issued again (the controller asks for it) before any pod mounts them.
func SupersededCertificates(in render.Input) []string {
	var out []string
	for _, a := range in.Authorities() {
		out = append(out, a.Superseded(CertificatesOf(in, a.Issuer()))...)
	}
	return out
}

func certificateReady(c *cmv1.Certificate) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == cmv1.CertificateConditionReady {
			return cond.Status == cmmeta.ConditionTrue && cond.ObservedGeneration == c.Generation
		}
	}
	return false
}

// CertificatesOf are the Secrets of the certificates issuer issues, but
// the CAs': a rotation waits for each to hold a certificate of the phase's
// Issuer.
func CertificatesOf(in render.Input, issuer string) []string {
	var secrets []string
	for _, part := range certifiedParts() {
		for _, c := range part.Certificates(in) {
			if c.Spec.IssuerRef.Name == issuer && !c.Spec.IsCA {
				secrets = append(secrets, c.Spec.SecretName)
			}
		}
	}
	return secrets
}
