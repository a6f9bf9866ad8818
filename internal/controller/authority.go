package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/rotation"
)

// authorityKind is a certificate authority the control plane rotates, as
// the controller keeps it: its condition, its status, and the pods that
// present or verify its certificates.
type authorityKind struct {
	key       string
	condition string
	// title names it in messages.
	title  string
	status func(*v1alpha1.HostedControlPlane) *v1alpha1.CertificateAuthorityStatus
	of     func(render.Input) render.Authority
	// trusting tells whether every pod that presents or verifies its
	// certificates runs what this pass rendered.
	trusting func(s *scope) bool
	// users says who trusts it, for the condition outside a rotation.
	users string
	// waitsFor, when set, says what else a phase still waits for; nil
	// when nothing.
	waitsFor func(s *scope) error
}

var authorityKinds = []authorityKind{
	{
		key: v1alpha1.RotateEtcdCA, condition: v1alpha1.EtcdCAReadyCondition, title: "etcd CA",
		status: func(h *v1alpha1.HostedControlPlane) *v1alpha1.CertificateAuthorityStatus {
			return &h.Status.CertificateAuthorities.Etcd
		},
		of: render.Input.EtcdCA,
		// Its members do not restart while certificates are issued again
		// from the new CA: they load them at their next handshakes, which
		// the pass observes (observeEtcdPresented).
		trusting: func(s *scope) bool { return s.apiServersRolled && etcdMembersRolled(s) && s.etcdPresented == nil },
		users:    "etcd's members, the API servers and the controller",
		waitsFor: func(s *scope) error { return s.etcdPresented },
	},
	{
		key: v1alpha1.RotateFrontProxyCA, condition: v1alpha1.FrontProxyCAReadyCondition, title: "front proxy CA",
		status: func(h *v1alpha1.HostedControlPlane) *v1alpha1.CertificateAuthorityStatus {
			return &h.Status.CertificateAuthorities.FrontProxy
		},
		of:       render.Input.FrontProxyCA,
		trusting: func(s *scope) bool { return s.apiServersRolled },
		users:    "the API servers",
	},
	{
		key: v1alpha1.RotateClusterCA, condition: v1alpha1.ClusterCAReadyCondition, title: "cluster CA",
		status: func(h *v1alpha1.HostedControlPlane) *v1alpha1.CertificateAuthorityStatus {
			return &h.Status.CertificateAuthorities.Cluster
		},
		of: render.Input.ClusterAuthority,
		// The controller manager signs with it, and it and the scheduler
		// verify the API servers with the ca.crt beside their certificate.
		trusting: func(s *scope) bool { return s.apiServersRolled && s.done[v1alpha1.ControllersReadyCondition] },
		users:    "the API servers (for client certificates), the kubeconfigs and kube-public/cluster-info",
	},
}

// authorityKindOf is the kind the rotate annotation calls key; false when
// none is.
func authorityKindOf(key string) (authorityKind, bool) {
	for _, k := range authorityKinds {
		if k.key == key {
			return k, true
		}
	}
	return authorityKind{}, false
}

// rotateAuthorities keeps the condition of each certificate authority the
// control plane rotates, and moves a rotation of it on, after the
// management phases of the pass: a phase ends once every certificate of
// the CA is issued by the phase's Issuer and every pod runs what it renders
// (see internal/rotation).
func (r *Reconciler) rotateAuthorities(ctx context.Context, s *scope) {
	for _, k := range authorityKinds {
		r.rotateAuthority(ctx, s, k)
	}
}

func (r *Reconciler) rotateAuthority(ctx context.Context, s *scope, k authorityKind) {
	st, a := k.status(s.hcp), k.of(s.in)
	current := st.Rotation
	// Outside a rotation too: a CA renewed with its key kept, or issued
	// twice when the control plane was created, leaves certificates that
	// would roll pods at their renewal (components.SupersededCertificates).
	reissued := r.reissueSuperseded(ctx, s, a)
	if current == nil {
		if reissued != nil {
			r.recorder.Eventf(s.hcp, nil, corev1.EventTypeWarning, v1alpha1.IssuingReason, "ReissueCertificate", "%v", reissued)
		}
		r.record(s.hcp, k.condition, readiness.Ready(authorityReady(k, a, st)))
		if _, err := r.removeNextAuthority(ctx, s, a, false); err != nil {
			r.recorder.Eventf(s.hcp, nil, corev1.EventTypeWarning, v1alpha1.ApplyFailedReason, "RotateCA",
				"the new %s of the last rotation is not removed from Secret %s yet: %v", k.title, a.Next, err)
		}
		return
	}
	rolled := s.done[v1alpha1.CertificatesReadyCondition] && a.Issued(components.CertificatesOf(s.in, a.Issuer())) && k.trusting(s)
	if reissued != nil {
		r.record(s.hcp, k.condition, readiness.Problem(string(current.Phase), "%v; retrying", reissued))
		return
	}
	observed := rotation.AuthorityObserved{Rolled: rolled, Replaced: a.Replaced()}
	if a.CrossSigns() && current.Phase == v1alpha1.TrustingNewCA {
		crossed, err := r.crossSign(ctx, s, k, a)
		if err != nil {
			r.record(s.hcp, k.condition, readiness.Problem(string(current.Phase), "%v; retrying", err))
			return
		}
		observed.Rolled = observed.Rolled && crossed
	}
	if a.Root() {
		wait, err := r.clusterAuthority(ctx, s, a, &observed)
		if err != nil || wait != "" {
			if err != nil {
				r.record(s.hcp, k.condition, readiness.Problem(string(current.Phase), "%v; retrying", err))
				return
			}
			r.record(s.hcp, k.condition, readiness.Waiting(string(current.Phase),
				"rotation of the %s asked for at %s, in this phase since %s: %s", k.title, stamp(current.StartedAt), stamp(current.Since), wait))
			return
		}
	}
	step := rotation.Authority(current, observed, time.Now())
	if step.Wake > 0 {
		s.wakeWithin(step.Wake)
	}
	switch {
	case step.Replace && !s.done[v1alpha1.CertificatesReadyCondition]:
		// The pass that renders DroppingOldCA changes the issuer of a CA
		// never rotated to the self-signed one: cert-manager issues the
		// old key a certificate of its own first. A key written while it
		// does can fail that issuance (see retryFailedIssuances), so the
		// new key waits until every certificate is issued for its spec.
		s.wakeWithin(time.Second)
	case step.Replace:
		if err := r.replaceAuthority(ctx, s, k, a); err != nil {
			r.record(s.hcp, k.condition, readiness.Problem(string(current.Phase), "%v; retrying", err))
			return
		}
	}
	st.Rotation = step.Next
	if step.Next == nil {
		st.RotatedAt = ptrTime(time.Now())
		// What verifies keeps reading the trust Secret, which it rolled to.
		st.TrustSecret = st.TrustSecret || a.CrossIssued()
		r.record(s.hcp, k.condition, readiness.Ready(authorityReady(k, a, st)))
		r.recorder.Eventf(s.hcp, nil, corev1.EventTypeNormal, v1alpha1.ReadyReason, "RotateCA",
			"the %s was rotated: the CA in Secret %s alone is trusted, a root of its own", k.title, a.Secret)
		return
	}
	if step.Next.Phase != current.Phase {
		s.wakeWithin(time.Second) // the next pass renders the new phase
		r.recorder.Eventf(s.hcp, nil, corev1.EventTypeNormal, string(step.Next.Phase), "RotateCA", "%s: %s", k.title, step.Message)
	}
	msg := step.Message
	if k.waitsFor != nil && step.Next.Phase == current.Phase {
		if err := k.waitsFor(s); err != nil {
			msg += "; waiting for: " + err.Error()
		}
	}
	r.record(s.hcp, k.condition, readiness.Waiting(string(step.Next.Phase),
		"rotation of the %s asked for at %s, in this phase since %s: %s", k.title, stamp(step.Next.StartedAt), stamp(step.Next.Since), msg))
}

// authorityReady is what the condition of a CA says outside a rotation.
func authorityReady(k authorityKind, a render.Authority, st *v1alpha1.CertificateAuthorityStatus) string {
	msg := fmt.Sprintf("%s trust the %s in Secret %s alone", k.users, k.title, a.Secret)
	if at := st.RotatedAt; at != nil {
		msg += "; last rotated at " + stamp(*at)
	}
	return msg
}

// etcdMembersRolled tells whether etcd has rolled out in this pass and
// every member's pod, terminating ones included, runs the template it
// rendered (the digests of the Secrets it mounts, the trust bundle among
// them, are in the template).
func etcdMembersRolled(s *scope) bool {
	if !s.done[v1alpha1.EtcdReadyCondition] || s.facts == nil || s.facts.etcdPods == nil || len(s.facts.etcdPods.Items) == 0 {
		return false
	}
	objs, err := etcd.Component{}.Render(s.in)
	if err != nil {
		return false
	}
	var want string
	for _, obj := range objs {
		if sts, ok := obj.(*appsv1.StatefulSet); ok {
			want = sts.Spec.Template.Annotations[render.SecretsHashAnnotation]
		}
	}
	for _, p := range s.facts.etcdPods.Items {
		if p.Annotations[render.SecretsHashAnnotation] != want {
			return false
		}
	}
	return want != ""
}

// startAuthorityRotation starts a rotation of a CA, once what the last one
// left behind is gone: the new CA is issued into a Secret that does not
// exist, never taken from one that held the CA in use.
func (r *Reconciler) startAuthorityRotation(ctx context.Context, s *scope, k authorityKind) {
	a := k.of(s.in)
	gone, err := r.removeNextAuthority(ctx, s, a, true)
	if err != nil || !gone {
		s.wakeWithin(time.Second)
		return
	}
	started := rotation.Start(v1alpha1.TrustingNewCA, time.Now())
	// The etcd CA's new CA is cross-signed, so its members restart once.
	started.CrossSigned = a.RotatesCrossSigned()
	k.status(s.hcp).Rotation = started
	s.wakeWithin(time.Second)
	if a.Root() {
		// The CAs the cluster CA still signs become roots of their own
		// first: the old cluster CA is dropped only once none is signed by
		// it (see clusterAuthority).
		for _, other := range authorityKinds {
			if st := other.status(s.hcp); other.key != k.key && st.Rotation == nil && st.RotatedAt == nil {
				r.startAuthorityRotation(ctx, s, other)
			}
		}
	}
	r.recorder.Eventf(s.hcp, nil, corev1.EventTypeNormal, string(v1alpha1.TrustingNewCA), "RotateCA",
		"rotating the %s: a new CA, a root of its own, is issued into Secret %s, and %s roll to trust it as well as the old one",
		k.title, a.Next, k.users)
}

// replaceAuthority writes the new CA's key into the CA's Secret, where the
// old one was. cert-manager keeps a key it finds there (rotationPolicy
// Never) and issues the Secret's certificate for it, self-signed by now;
// until the pass observes that (Replaced), certificates are issued by the
// new CA's own Secret.
func (r *Reconciler) replaceAuthority(ctx context.Context, s *scope, k authorityKind, a render.Authority) error {
	next := &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: s.in.Namespace(), Name: a.Next}, next); err != nil {
		return fmt.Errorf("read the new %s in Secret %s: %w", k.title, a.Next, err)
	}
	key := next.Data[corev1.TLSPrivateKeyKey]
	if len(key) == 0 {
		return fmt.Errorf("the Secret %s holds no %s", next.Name, corev1.TLSPrivateKeyKey)
	}
	current := &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: s.in.Namespace(), Name: a.Secret}, current); err != nil {
		return fmt.Errorf("read Secret %s: %w", a.Secret, err)
	}
	if bytes.Equal(current.Data[corev1.TLSPrivateKeyKey], key) {
		return nil // written in a pass the cache did not show yet
	}
	patch := client.MergeFromWithOptions(current.DeepCopy(), client.MergeFromWithOptimisticLock{})
	current.Data[corev1.TLSPrivateKeyKey] = key
	if err := r.client.Patch(ctx, current, patch); err != nil {
		return fmt.Errorf("write the new %s into Secret %s: %w", k.title, current.Name, err)
	}
	r.recorder.Eventf(s.hcp, current, corev1.EventTypeNormal, string(v1alpha1.DroppingOldCA), "RotateCA",
		"wrote the key of the new %s into Secret %s, in place of the old one; cert-manager issues it a self-signed certificate", k.title, current.Name)
	return nil
}

// removeNextAuthority removes the Certificate, the Issuer and the Secret of
// the new CA of a rotation that ended (its key is in the CA's Secret now),
// the Certificate first or cert-manager would issue it again, and, but of
// the cluster CA, whose serving certificates it issues ever after, the
// Issuer and the Secret of Cross: a copy of that key no certificate is
// issued from any more. It tells whether all are gone. Outside a rotation
// the cache is asked alone, so an idle control plane costs no request;
// before one starts, the API server too.
func (r *Reconciler) removeNextAuthority(ctx context.Context, s *scope, a render.Authority, live bool) (bool, error) {
	key := client.ObjectKey{Namespace: s.in.Namespace(), Name: a.Next}
	gone, err := r.removeNamed(ctx, key, live, &cmv1.Certificate{}, &cmv1.Issuer{}, &corev1.Secret{})
	if err != nil || !gone || !a.RotatesCrossSigned() {
		return gone, err
	}
	return r.removeNamed(ctx, client.ObjectKey{Namespace: s.in.Namespace(), Name: a.Cross}, live, &cmv1.Issuer{}, &corev1.Secret{})
}

// authoritySecret is what the Secret of a certificate authority holds, as
// rendering needs it (render.AuthoritySecret): whether it is a root of its
// own, and digests of its key and of its certificate's.
func authoritySecret(secret *corev1.Secret) render.AuthoritySecret {
	a := render.AuthoritySecret{}
	if key := secret.Data[corev1.TLSPrivateKeyKey]; len(key) > 0 {
		a.Key = contract.Digest(key)
	}
	cert, err := parseCertificate(secret.Data[corev1.TLSCertKey])
	if err != nil {
		return a
	}
	a.CertKey = contract.Digest(cert.RawSubjectPublicKeyInfo)
	if len(cert.SubjectKeyId) > 0 {
		a.KeyID = contract.Digest(cert.SubjectKeyId)
	}
	a.SelfSigned = bytes.Equal(cert.RawIssuer, cert.RawSubject) && cert.CheckSignatureFrom(cert) == nil
	return a
}

// etcdPresentedFresh is how old an answer of which certificates etcd's
// members present may be: the kubelet writes a Secret issued again into a
// running pod's files within about a minute, so a few seconds late is soon
// enough.
const etcdPresentedFresh = 5 * time.Second

// errEtcdPresentedAsked is the wait for the first answer.
var errEtcdPresentedAsked = errors.New("asked which certificates etcd's members present; no answer yet")

// observeEtcdPresented tells, while a rotation of the etcd CA issues every
// certificate again from the new CA (IssuingFromNewCA), whether every etcd
// member presents one the new CA's key signed on its client and peer ports
// (etcd.Checker.Presents, verifying with the new CA alone): the members
// load their certificates at every handshake, so they take the new ones up
// without a restart once the kubelet has written them, and the phase ends
// only then.
// The members are asked outside the pass (see package probes), and only
// answers asked since the phase began count.
func (r *Reconciler) observeEtcdPresented(ctx context.Context, s *scope) {
	a := s.in.EtcdCA()
	if !a.IssuingFromNew() || s.facts == nil || s.facts.etcdPods == nil {
		return
	}
	key := client.ObjectKeyFromObject(s.hcp)
	r.etcdPresented.Outdate(key, a.Rotation().Since.Time)
	t, err := etcd.PodsTarget(ctx, r.client, types.NamespacedName{Namespace: s.hcp.Namespace, Name: s.in.ClusterName()}, s.facts.etcdPods.Items)
	if err != nil {
		s.etcdPresented = err
		s.wakeWithin(etcdPresentedFresh)
		return
	}
	anchor := a.NewAnchor()
	answer, ok := r.etcdPresented.Answer(ctx, key, etcdPresentedFresh, time.Now(), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, r.etcd.Presents(ctx, t, anchor)
	})
	s.etcdPresented = answer.Err
	if !ok {
		s.etcdPresented = errEtcdPresentedAsked
	}
	if s.etcdPresented != nil {
		s.wakeWithin(etcdPresentedFresh)
	}
}
