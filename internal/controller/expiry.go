package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// validity is the lifetime of the certificate a Secret holds, and which
// CA key signed it: contract.Digest of its authority key identifier, empty
// when it names none.
type validity struct {
	secret              string
	notBefore, notAfter time.Time
	signer              string
}

// certificateValidity reads the lifetime and the signer of the certificate
// in a Secret's tls.crt, if it holds one. Only the dates and a digest leave
// this function: the certificate is the Secret's value.
func certificateValidity(secret *corev1.Secret) (validity, bool) {
	cert, err := parseCertificate(secret.Data[corev1.TLSCertKey])
	if err != nil {
		return validity{}, false
	}
	v := validity{secret: secret.Name, notBefore: cert.NotBefore, notAfter: cert.NotAfter}
	if len(cert.AuthorityKeyId) > 0 {
		v.signer = contract.Digest(cert.AuthorityKeyId)
	}
	return v, true
}

// overdue is whether a certificate should have been renewed long ago:
// cert-manager renews it a third of its lifetime before the end, so with a
// sixth left it missed half of that window, and the rest of it is the time
// left to repair what keeps it from renewing.
func (v validity) overdue(now time.Time) bool {
	return now.After(v.notAfter.Add(-v.notAfter.Sub(v.notBefore) / 6))
}

// renewal says whether every certificate is renewed on schedule, naming
// those that are not and when they expire, or the next to expire.
func renewal(now time.Time, certs []validity) readiness.Outcome {
	if len(certs) == 0 {
		return readiness.Waiting(v1alpha1.IssuingReason, "no certificate issued yet")
	}
	certs = slices.SortedFunc(slices.Values(certs), func(a, b validity) int { return cmp.Compare(a.notAfter.Unix(), b.notAfter.Unix()) })
	// The message names times, not durations, so that it stays the same
	// from pass to pass and the event is told once.
	var expired, overdue []string
	for _, c := range certs {
		at := c.notAfter.UTC().Format(time.RFC3339)
		switch {
		case !now.Before(c.notAfter):
			expired = append(expired, fmt.Sprintf("%s (expired at %s)", c.secret, at))
		case c.overdue(now):
			overdue = append(overdue, fmt.Sprintf("%s (expires at %s)", c.secret, at))
		}
	}
	const why = "cert-manager renews a certificate when two thirds of its lifetime have passed: check that it runs and that the control plane's Issuers are ready (kubectl get certificates,issuers)"
	switch {
	case len(expired) > 0:
		return readiness.Problem(v1alpha1.CertificateExpiredReason, "Secrets %s hold expired certificates; %s",
			strings.Join(append(expired, overdue...), ", "), why)
	case len(overdue) > 0:
		return readiness.Problem(v1alpha1.RenewalOverdueReason, "Secrets %s hold certificates past their renewal with less than a sixth of their lifetime left; %s",
			strings.Join(overdue, ", "), why)
	}
	return readiness.Outcome{Done: true, Reason: v1alpha1.RenewedOnScheduleReason, Message: fmt.Sprintf(
		"every one of %d certificates is renewed on schedule; the next to expire is in Secret %s, at %s",
		len(certs), certs[0].secret, certs[0].notAfter.UTC().Format(time.RFC3339))}
}

// recordRenewal says in CertificatesRenewed, and in the metric, how the
// certificates the pass read are renewed. Running control planes are passed
// over every probeInterval, so an overdue certificate is told within
// minutes of its sixth.
func (r *Reconciler) recordRenewal(s *scope) {
	if s.certificates == nil {
		return
	}
	expiry.set(types.NamespacedName{Namespace: s.hcp.Namespace, Name: s.hcp.Name}, s.certificates)
	r.record(s.hcp, v1alpha1.CertificatesRenewedCondition, renewal(time.Now(), s.certificates))
}

// expiry is the metric hostedcp_certificate_expiry_seconds: for each
// certificate of each control plane, the seconds until it expires at the
// time of the scrape (negative once it has), from what the last pass read.
var expiry = &expiryCollector{
	desc: prometheus.NewDesc("hostedcp_certificate_expiry_seconds",
		"Seconds until the certificate in a control plane's Secret expires (negative once it has), by control plane and Secret.",
		[]string{"namespace", "name", "secret"}, nil),
	certs: map[types.NamespacedName][]validity{},
}

func init() { metrics.Registry.MustRegister(expiry) }

type expiryCollector struct {
	desc  *prometheus.Desc
	mu    sync.Mutex
	certs map[types.NamespacedName][]validity
}

func (c *expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *expiryCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for cp, certs := range c.certs {
		for _, v := range certs {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, time.Until(v.notAfter).Seconds(), cp.Namespace, cp.Name, v.secret)
		}
	}
}

// set replaces what a control plane's certificates are; nil forgets them.
func (c *expiryCollector) set(cp types.NamespacedName, certs []validity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if certs == nil {
		delete(c.certs, cp)
		return
	}
	c.certs[cp] = certs
}
