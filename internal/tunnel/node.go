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

	"k8s.io/apimachinery/pkg/util/wait"
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
	// patience bounds open's attempts together.
	patience time.Duration
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
	return &Node{upstream: upstream, host: host, direct: direct, roots: roots, log: log, drain: drainTimeout, patience: handshakeTimeout}, nil
}

// Serve implements End.
func (n *Node) Serve(ctx context.Context, ln net.Listener) error {
	return accept(ctx, ln, n.log, n.drain, func(ctx context.Context, conn net.Conn) error {
		up, err := n.open(ctx)
		if err != nil {
			return err
		}
		splice(conn, up)
		return nil
	})
}

// retry is how open tries again: soon at first, then less often, within
// handshakeTimeout in all.
var retry = wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 8}

// open connects a pod's connection to the next hop. Nothing of the pod's
// has been sent yet, so a failed attempt is safe to make again, and it is:
// a Gateway or load balancer that still sends a new connection to an API
// server pod that has just stopped listening, or not yet to its
// replacement, drops it, and the pod would see its connection reset.
// Retrying costs that pod a short wait instead. open gives up after
// handshakeTimeout (a pod's client gives its TLS handshake about as long),
// at once when the peer's certificate is refused (it is not this tenant's
// Server, and asking again changes nothing), and when ctx ends. A success
// after failures logs the first failure, so the operator sees the blip.
func (n *Node) open(ctx context.Context) (net.Conn, error) {
	dial := n.dial
	if n.direct {
		dial = n.dialDirect
	}
	ctx, cancel := context.WithTimeout(ctx, n.patience)
	defer cancel()
	var up net.Conn
	var first, last error
	attempts := 0
	err := wait.ExponentialBackoffWithContext(ctx, retry, func(ctx context.Context) (bool, error) {
		attempts++
		up, last = dial(ctx)
		if last == nil {
			return true, nil
		}
		if first == nil {
			first = last
		}
		var refused *tls.CertificateVerificationError
		if errors.As(last, &refused) {
			return false, last
		}
		return false, nil
	})
	if err != nil {
		if last == nil {
			last = err
		}
		if attempts > 1 {
			return nil, fmt.Errorf("%w (after %d attempts)", last, attempts)
		}
		return nil, last
	}
	if first != nil {
		n.log.Info("connected after failed attempts", "attempts", attempts, "firstError", first.Error())
	}
	return up, nil
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
