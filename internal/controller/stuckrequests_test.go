package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// A CertificateRequest of a Certificate that has issued for half a minute,
// left unsigned for half a minute, is deleted with an event that names it
// and says why: its temporary private key Secret is gone, or its Issuer is
// ready and it says what its Ready condition says; requests that are
// signed, that are young, that wait for an Issuer not ready, or of a
// Certificate that issues since moments, or of something else, stay. A
// Certificate that issues since moments brings the pass back when it is
// half a minute.
func TestStuckRequestsReleased(t *testing.T) {
	now := time.Now()
	cert := func(name string, issuingFor time.Duration) *cmv1.Certificate {
		c := &cmv1.Certificate{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{contract.ControlPlaneLabel: "demo"},
		}}
		if issuingFor > 0 {
			c.Status.Conditions = []cmv1.CertificateCondition{{
				Type: cmv1.CertificateConditionIssuing, Status: cmmeta.ConditionTrue, LastTransitionTime: &metav1.Time{Time: now.Add(-issuingFor)},
			}}
		}
		return c
	}
	etcd, proxy, fresh := cert("demo-etcd", time.Minute), cert("demo-proxy", time.Minute), cert("demo-ca", 10*time.Second)
	issuer := func(name string, ready bool) *cmv1.Issuer {
		i := &cmv1.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if ready {
			i.Status.Conditions = []cmv1.IssuerCondition{{Type: cmv1.IssuerConditionReady, Status: cmmeta.ConditionTrue}}
		}
		return i
	}
	readyIssuer, waitingIssuer := issuer("demo-selfsigned", true), issuer("demo-ca", false)
	request := func(name string, of *cmv1.Certificate, keySecret string, age time.Duration, ready cmmeta.ConditionStatus) *cmv1.CertificateRequest {
		req := &cmv1.CertificateRequest{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), CreationTimestamp: metav1.Time{Time: now.Add(-age)},
			Annotations: map[string]string{cmv1.CertificateRequestPrivateKeyAnnotationKey: keySecret},
		}, Spec: cmv1.CertificateRequestSpec{IssuerRef: cmmeta.IssuerReference{Kind: cmv1.IssuerKind, Name: readyIssuer.Name}}}
		if of != nil {
			req.OwnerReferences = []metav1.OwnerReference{{
				APIVersion: cmv1.SchemeGroupVersion.String(), Kind: "Certificate", Name: of.Name, UID: of.UID, Controller: new(true),
			}}
		}
		if ready != "" {
			req.Status.Conditions = []cmv1.CertificateRequestCondition{{Type: cmv1.CertificateRequestConditionReady, Status: ready, Reason: cmv1.CertificateRequestReasonPending}}
		}
		return req
	}
	stuck := []*cmv1.CertificateRequest{
		request("demo-etcd-3", etcd, "demo-etcd-gone", time.Minute, cmmeta.ConditionFalse),
		request("demo-proxy-3", proxy, "demo-proxy-abcde", time.Minute, cmmeta.ConditionFalse), // its Secret exists
	}
	kept := []*cmv1.CertificateRequest{
		request("demo-etcd-2", etcd, "demo-etcd-old", time.Hour, cmmeta.ConditionTrue),  // signed long ago
		request("demo-etcd-4", etcd, "demo-etcd-new", 5*time.Second, ""),                // just made
		request("demo-ca-1", fresh, "demo-ca-gone", time.Minute, cmmeta.ConditionFalse), // its Certificate issues since moments
		request("other-1", nil, "other-gone", time.Minute, cmmeta.ConditionFalse),       // not a Certificate's
	}
	kinds := observedKinds()
	require.NoError(t, cmv1.AddToScheme(kinds))
	objs := []client.Object{etcd, proxy, fresh, secret("demo-proxy-abcde", nil), readyIssuer, waitingIssuer}
	for _, k := range append(slices.Clone(stuck), kept...) {
		objs = append(objs, k)
	}
	c := fake.NewClientBuilder().WithScheme(kinds).WithObjects(objs...).Build()
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{client: c, apiReader: c, recorder: recorder}
	s := &scope{hcp: controlPlane(nil)}

	certs, err := r.certificates(t.Context(), s)
	require.NoError(t, err)
	require.NoError(t, r.releaseStuckRequests(t.Context(), s, certs))
	for _, k := range stuck {
		err = c.Get(t.Context(), client.ObjectKeyFromObject(k), &cmv1.CertificateRequest{})
		assert.True(t, apierrors.IsNotFound(err), "%s, unsigned for a minute, is deleted: %v", k.Name, err)
	}
	for _, k := range kept {
		assert.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(k), &cmv1.CertificateRequest{}), "%s stays", k.Name)
	}
	require.Len(t, recorder.Events, 2)
	var events []string
	for range 2 {
		event := <-recorder.Events
		assert.True(t, strings.HasPrefix(event, "Normal Issuing "), event)
		events = append(events, event)
	}
	assert.Contains(t, strings.Join(events, "\n"),
		"deleted CertificateRequest demo-etcd-3 of Certificate demo-etcd, unsigned after 30s: cert-manager replaced the Secret demo-etcd-gone that holds its private key; cert-manager asks again")
	assert.Contains(t, strings.Join(events, "\n"),
		"deleted CertificateRequest demo-proxy-3 of Certificate demo-proxy, unsigned after 30s: its Issuer demo-selfsigned is ready, and it says Pending: ")
	// Less the time the test took to get there (seconds on a loaded machine).
	assert.InDelta(t, 20*time.Second, s.soon, float64(5*time.Second), "back when the young Certificate has issued for half a minute")
}

// While a rotation writes keys, a Certificate whose last issuance failed is
// issued again at once (Issuing, ManuallyTriggered, and an event), five
// seconds after the failure and up to five failures in a row; one that
// failed moments ago brings the pass back then; one issuing, one that
// never failed and one that failed too often are left to cert-manager, as
// is every Certificate when no rotation writes keys.
func TestFailedIssuancesRetriedWhileKeysRotate(t *testing.T) {
	now := time.Now()
	cert := func(name string, failedAgo time.Duration, attempts int, issuing bool) *cmv1.Certificate {
		c := &cmv1.Certificate{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, Generation: 2, Labels: map[string]string{contract.ControlPlaneLabel: "demo"},
		}}
		if failedAgo > 0 {
			c.Status.LastFailureTime, c.Status.FailedIssuanceAttempts = &metav1.Time{Time: now.Add(-failedAgo)}, &attempts
			c.Status.Conditions = []cmv1.CertificateCondition{{Type: cmv1.CertificateConditionIssuing, Status: cmmeta.ConditionFalse, Reason: "Failed"}}
		}
		if issuing {
			c.Status.Conditions = []cmv1.CertificateCondition{{Type: cmv1.CertificateConditionIssuing, Status: cmmeta.ConditionTrue, Reason: "Reissuing"}}
		}
		return c
	}
	failed := cert("demo-proxy", time.Minute, 1, false)
	left := []*cmv1.Certificate{
		cert("demo-etcd", 2*time.Second, 1, false),                 // failed moments ago
		cert("demo-ca", time.Minute, retryFailedAttempts+1, false), // failed too often
		cert("demo-sa", time.Minute, 1, true),                      // issuing again already
		cert("demo-admin", 0, 0, false),                            // never failed
	}
	kinds := observedKinds()
	require.NoError(t, cmv1.AddToScheme(kinds))
	objs := []client.Object{failed}
	for _, c := range left {
		objs = append(objs, c)
	}
	c := fake.NewClientBuilder().WithScheme(kinds).WithObjects(objs...).WithStatusSubresource(objs...).Build()
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{client: c, apiReader: c, recorder: recorder}
	issuingReason := func(name string) string {
		got := &cmv1.Certificate{}
		require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: name}, got))
		for _, cond := range got.Status.Conditions {
			if cond.Type == cmv1.CertificateConditionIssuing && cond.Status == cmmeta.ConditionTrue {
				return cond.Reason
			}
		}
		return ""
	}

	idle := &scope{hcp: controlPlane(nil)}
	certs, err := r.certificates(t.Context(), idle)
	require.NoError(t, err)
	require.NoError(t, r.retryFailedIssuances(t.Context(), idle, certs))
	assert.Empty(t, issuingReason("demo-proxy"), "no rotation writes keys: cert-manager's backoff rules")
	assert.Empty(t, recorder.Events)

	s := &scope{hcp: controlPlane(nil)}
	s.hcp.Status.CertificateAuthorities.FrontProxy.Rotation = &v1alpha1.KeyRotation{Phase: v1alpha1.DroppingOldCA}
	require.NoError(t, r.retryFailedIssuances(t.Context(), s, certs))
	assert.Equal(t, "ManuallyTriggered", issuingReason("demo-proxy"), "the failed Certificate is issued again")
	for _, l := range left[:2] {
		assert.Empty(t, issuingReason(l.Name), "%s is left to cert-manager", l.Name)
	}
	assert.Equal(t, "Reissuing", issuingReason("demo-sa"), "one issuing is left as it is")
	require.Len(t, recorder.Events, 1)
	event := <-recorder.Events
	assert.True(t, strings.HasPrefix(event, "Normal Issuing "), event)
	assert.Contains(t, event, "asked cert-manager to issue Certificate demo-proxy again: its last issuance failed (1 in a row) while the control plane's keys rotate")
	assert.InDelta(t, 3*time.Second, s.soon, float64(time.Second), "back when the one that failed moments ago is due")
}
