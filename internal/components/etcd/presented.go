package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/attribute"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/telemetry"
)

// Presents tells whether every member of t presents, on its client port
// and on its peer port, a certificate that a CA of anchors signed for t's
// server name: nil when each does. etcd loads its serving and peer
// certificates at every TLS handshake, so once the kubelet has written the
// certificates issued again into a running member's files, its next
// connections present them, with no restart; the rotation of the etcd CA
// asks this before it stops trusting the old CA (see internal/rotation).
// Each member is dialled afresh on both ports, all at once, each dial
// bounded by the call timeout; what the member thinks of the health-check
// client certificate presented to it does not matter.
func (c *Checker) Presents(ctx context.Context, t Target, anchors []byte) (err error) {
	ctx, span := telemetry.Start(ctx, "etcd presented certificates",
		telemetry.Namespace.String(t.Cluster.Namespace), telemetry.Cluster.String(t.Cluster.Name), attribute.Int("etcd.endpoints", len(t.Endpoints)))
	defer func() { telemetry.End(span, err) }()
	cfg, err := clientTLS(t)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(anchors) {
		return fmt.Errorf("the CA to verify etcd's certificates with: %w", errNoPEM)
	}
	if len(t.Endpoints) == 0 {
		return errors.New("no etcd member to ask")
	}
	errs := make([]error, 2*len(t.Endpoints))
	var wg sync.WaitGroup
	for i, ep := range t.Endpoints {
		host, _, err := net.SplitHostPort(ep)
		if err != nil {
			return fmt.Errorf("etcd endpoint %q: %w", ep, err)
		}
		name := t.Names[ep]
		if name == "" {
			name = ep
		}
		for j, port := range []struct {
			what string
			addr string
		}{{"client", ep}, {"peer", net.JoinHostPort(host, strconv.Itoa(peerPort))}} {
			wg.Go(func() {
				if err := c.presented(ctx, port.addr, cfg, roots); err != nil {
					errs[2*i+j] = fmt.Errorf("member %s on its %s port (%s): %w", name, port.what, port.addr, err)
				}
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// errNothingPresented is a handshake that ended before the member showed a
// certificate.
var errNothingPresented = errors.New("presented no certificate")

// presented dials addr and verifies the certificate presented there with
// roots, for cfg's server name.
func (c *Checker) presented(ctx context.Context, addr string, cfg *tls.Config, roots *x509.CertPool) error {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout())
	defer cancel()
	verified := errNothingPresented
	cfg = cfg.Clone()
	// Verified here, with roots alone, so that the member's answer to the
	// client certificate cannot hide what it presented.
	cfg.InsecureSkipVerify = true //nolint:gosec // VerifyConnection verifies
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		verified = verifyPresented(cs, roots, cfg.ServerName)
		return verified
	}
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	if conn != nil {
		_ = conn.Close()
	}
	if errors.Is(verified, errNothingPresented) && err != nil {
		return err
	}
	return verified
}

func verifyPresented(cs tls.ConnectionState, roots *x509.CertPool, serverName string) error {
	if len(cs.PeerCertificates) == 0 {
		return errNothingPresented
	}
	intermediates := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: intermediates, DNSName: serverName,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}
