package tunnel

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Server is the sidecar beside a kube-apiserver: it terminates the outer
// TLS the nodes open through the Gateway and splices what is inside, the
// pods' own TLS, to the API server over plain TCP.
type Server struct {
	upstream string
	cert     *reloaded[*tls.Certificate]
	log      *slog.Logger
	drain    time.Duration
}

// NewServer is a Server with the certificate and key in certFile and keyFile
// (for kas-tunnel.<cluster>.<namespace>.<domain>, signed by the cluster CA,
// read again when they change) that forwards to the API server at upstream.
func NewServer(certFile, keyFile, upstream string, log *slog.Logger) (*Server, error) {
	cert, err := newReloaded(log, func(c [][]byte) (*tls.Certificate, error) {
		pair, err := tls.X509KeyPair(c[0], c[1])
		return &pair, err
	}, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	return &Server{upstream: upstream, cert: cert, log: log, drain: drainTimeout}, nil
}

// Serve implements End.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cert.get(), nil },
	}
	return accept(ctx, ln, s.log, s.drain, func(ctx context.Context, conn net.Conn) error {
		ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
		defer cancel()
		outer := tls.Server(conn, cfg)
		if err := outer.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("outer TLS handshake: %w", err)
		}
		up, err := s.dial(ctx)
		if err != nil {
			return err
		}
		splice(outer, up)
		return nil
	})
}

// Ready implements End: the API server accepts TCP connections.
func (s *Server) Ready(ctx context.Context) error {
	up, err := s.dial(ctx)
	if err != nil {
		return err
	}
	return up.Close()
}

func (s *Server) dial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAliveConfig: keepAlive}
	up, err := d.DialContext(ctx, "tcp", s.upstream)
	if err != nil {
		return nil, fmt.Errorf("connect to the API server: %w", err)
	}
	return up, nil
}
