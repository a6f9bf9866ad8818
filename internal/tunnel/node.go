package tunnel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Node is the proxy on a worker: it accepts the pods' connections to
// kubernetes.default on the node-local address and carries each, unopened,
// inside an outer TLS connection to its tenant's Server.
type Node struct {
	upstream string
	host     string
	direct   bool
	roots    *reloaded[*x509.CertPool]
	log      *slog.Logger
	drain    time.Duration
}

// NewNode is a Node that dials upstream, kas-tunnel.<cluster>.<namespace>.<domain>:443
// through the Gateway, by name: the name is the outer SNI the Gateway
// routes by, and what the Server's certificate must be valid for, signed by
// the CA in caFile (read again when it changes).
//
// With direct, upstream is the API server itself behind a load balancer of
// the tenant's own (one that gives a name rather than an address, as AWS's
// do), which needs no SNI to route: connections are forwarded as they are,
// without an outer TLS, and the pod's own TLS verifies the API server.
// Readiness still shakes hands with the API server at upstream and checks
// its certificate for the name, signed by the CA in caFile.
func NewNode(upstream, caFile string, direct bool, log *slog.Logger) (*Node, error) {
	host, _, err := net.SplitHostPort(upstream)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	roots, err := newReloaded(log, func(c [][]byte) (*x509.CertPool, error) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(c[0]) {
			return nil, errors.New("no PEM certificate")
		}
		return pool, nil
	}, caFile)
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	return &Node{upstream: upstream, host: host, direct: direct, roots: roots, log: log, drain: drainTimeout}, nil
}

// Serve implements End.
func (n *Node) Serve(ctx context.Context, ln net.Listener) error {
	return accept(ctx, ln, n.log, n.drain, func(ctx context.Context, conn net.Conn) error {
		dial := n.dial
		if n.direct {
			dial = n.dialDirect
		}
		up, err := dial(ctx)
		if err != nil {
			return err
		}
		splice(conn, up)
		return nil
	})
}

// Ready implements End: an outer TLS handshake with the tenant's Server
// succeeds (with direct, a handshake with the API server).
func (n *Node) Ready(ctx context.Context) error {
	up, err := n.dial(ctx)
	if err != nil {
		return err
	}
	return up.Close()
}

// dial opens the outer TLS connection. It fails unless the peer proves,
// with a certificate of the cluster CA for the upstream name, that it is
// this tenant's Server: nothing else gets the pods' bytes.
func (n *Node) dial(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	d := tls.Dialer{
		NetDialer: &net.Dialer{Timeout: dialTimeout, KeepAliveConfig: keepAlive},
		Config:    &tls.Config{ServerName: n.host, RootCAs: n.roots.get(), MinVersion: tls.VersionTLS13},
	}
	up, err := d.DialContext(ctx, "tcp", n.upstream)
	if err != nil {
		return nil, fmt.Errorf("tunnel to %s: %w", n.upstream, err)
	}
	return up, nil
}

// dialDirect opens a TCP connection to the API server's load balancer.
func (n *Node) dialDirect(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAliveConfig: keepAlive}
	up, err := d.DialContext(ctx, "tcp", n.upstream)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", n.upstream, err)
	}
	return up, nil
}
