package controller

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// cert-manager renews at two thirds of a lifetime: a certificate with more
// than a sixth left is on schedule, one with less was not renewed and is
// told (with the Secret and the time left, and what to check), and an
// expired one more loudly.
func TestRenewalOverdueAtASixth(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	year := 365 * 24 * time.Hour
	admin := validity{secret: "demo-admin", notBefore: now.Add(-17 * time.Hour), notAfter: now.Add(7 * time.Hour)}
	apiserver := validity{secret: "demo-apiserver", notBefore: now.Add(-year / 2), notAfter: now.Add(year / 2)}

	out := renewal(now, []validity{apiserver, admin})
	assert.True(t, out.Done)
	assert.Equal(t, v1alpha1.RenewedOnScheduleReason, out.Reason)
	assert.Equal(t, "every one of 2 certificates is renewed on schedule; the next to expire is in Secret demo-admin, at 2026-11-26T19:00:00Z", out.Message)

	admin.notBefore, admin.notAfter = now.Add(-21*time.Hour), now.Add(3*time.Hour)
	out = renewal(now, []validity{apiserver, admin})
	assert.False(t, out.Done)
	assert.True(t, out.Warn, "a Warning event")
	assert.Equal(t, v1alpha1.RenewalOverdueReason, out.Reason)
	assert.Contains(t, out.Message, "Secrets demo-admin (expires at 2026-11-26T15:00:00Z) hold certificates past their renewal")
	assert.Equal(t, out, renewal(now.Add(time.Minute), []validity{apiserver, admin}), "the same a pass later: one event")
	assert.Contains(t, out.Message, "kubectl get certificates,issuers")

	apiserver.notAfter = now.Add(-time.Minute)
	out = renewal(now, []validity{apiserver, admin})
	assert.Equal(t, v1alpha1.CertificateExpiredReason, out.Reason)
	assert.Contains(t, out.Message, "Secrets demo-apiserver (expired at 2026-11-26T11:59:00Z), demo-admin (expires at 2026-11-26T15:00:00Z) hold expired certificates")
}

// A pass reads the certificates' lifetimes from the Secrets (and nothing
// else of them), serves the seconds left as a metric and tells an overdue
// one in CertificatesRenewed and one Warning event.
func TestRenewalIsToldAndMeasured(t *testing.T) {
	fresh := certificatePEM(t, time.Now().Add(-time.Hour), time.Now().Add(23*time.Hour))
	stale := certificatePEM(t, time.Now().Add(-23*time.Hour), time.Now().Add(time.Hour))
	hcp := controlPlane(nil)
	s := observed(t, hcp,
		secret("demo-apiserver", map[string][]byte{corev1.TLSCertKey: fresh}),
		secret("demo-admin", map[string][]byte{corev1.TLSCertKey: stale}),
		secret("demo-egress-selector", map[string][]byte{"egress-selector.yaml": []byte("no certificate")}))
	require.Len(t, s.certificates, 2)

	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{recorder: recorder}
	r.recordRenewal(s)
	r.recordRenewal(s)
	c := conditions.Get(hcp, v1alpha1.CertificatesRenewedCondition)
	require.NotNil(t, c)
	assert.Equal(t, v1alpha1.RenewalOverdueReason, c.Reason)
	assert.Contains(t, c.Message, "demo-admin (expires at")
	assert.NotContains(t, c.Message, string(stale[30:60]), "no part of the Secret's value")
	assert.Len(t, recorder.Events, 1, "one Warning event for the situation, not one per pass")
	assert.Contains(t, <-recorder.Events, "Warning RenewalOverdue")

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(expiry))
	left := map[string]float64{}
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		require.Equal(t, "hostedcp_certificate_expiry_seconds", f.GetName())
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			require.Equal(t, "ns/demo", labels["namespace"]+"/"+labels["name"])
			left[labels["secret"]] = m.GetGauge().GetValue()
		}
	}
	assert.Len(t, left, 2)
	assert.InDelta(t, time.Hour.Seconds(), left["demo-admin"], 60, "seconds until the admin certificate expires")
	assert.InDelta(t, (23 * time.Hour).Seconds(), left["demo-apiserver"], 60)
	expiry.set(types.NamespacedName{Namespace: "ns", Name: "demo"}, nil)
	assert.Zero(t, testutil.CollectAndCount(expiry), "a deleted control plane's series go")
}

// certificatePEM is a self-signed certificate valid from notBefore to
// notAfter.
func certificatePEM(t *testing.T, notBefore, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"}, NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
