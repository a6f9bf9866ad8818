package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
)

// Keys serves the API server beside it, on loopback, the discovery document
// and the keys of the management cluster's service account issuer, from the
// files the controller writes into the authentication Secret; it is the
// same image's other sidecar, since the API servers' network policy keeps
// the management cluster's API server out of their reach. The files are
// read at every request: a new key reaches the API server as soon as the
// kubelet updates the Secret's files. They are public keys; nothing here
// is secret but the serving key, the API server's own.
type Keys struct {
	discoveryFile, keysFile string
	cert                    *reloaded[*tls.Certificate]
	log                     *slog.Logger
}

// NewKeys serves discoveryFile at /.well-known/openid-configuration and
// keysFile at /openid/v1/jwks with the certificate and key in certFile and
// keyFile, read again when they change.
func NewKeys(discoveryFile, keysFile, certFile, keyFile string, log *slog.Logger) (*Keys, error) {
	cert, err := newReloaded(log, func(c [][]byte) (*tls.Certificate, error) {
		pair, err := tls.X509KeyPair(c[0], c[1])
		return &pair, err
	}, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	return &Keys{discoveryFile: discoveryFile, keysFile: keysFile, cert: cert, log: log}, nil
}

// Run serves on listen until ctx is done.
func (k *Keys) Run(ctx context.Context, listen string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", k.file(k.discoveryFile))
	mux.HandleFunc("GET /openid/v1/jwks", k.file(k.keysFile))
	s := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: readyTimeout,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return k.cert.get(), nil },
		},
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = s.Close() })
	defer stop()
	if err := s.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

func (k *Keys) file(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		data, err := os.ReadFile(path) //nolint:gosec // a path of the command line, not of a request
		if err != nil || len(data) == 0 {
			k.log.Warn("nothing to serve", "file", path)
			http.Error(w, "not written yet", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	}
}
