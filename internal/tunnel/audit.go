package tunnel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/netfail"
)

// maxAuditBatch bounds the body of one post: kube-apiserver's webhook
// batches hold at most 400 events (--audit-webhook-batch-max-size), each
// at most a few hundred KiB at RequestResponse level.
const maxAuditBatch = 64 << 20

// AuditForwarder is the sidecar beside kube-apiserver that gives audit
// events to more than one webhook target: the API server posts to one
// webhook backend only (--audit-webhook-config-file names one server), so
// it posts to the forwarder on loopback, and the forwarder posts each
// batch, unchanged, to every target in parallel. It answers only once
// every target has answered, and with an error when one failed: the API
// server's mode then means for every target what it means for one
// (blocking waits for all, blocking-strict fails a request whose event a
// target refused, batch retries the batch), at the cost that a retried
// batch reaches again the targets that had taken it (each event carries
// its auditID, by which a receiver can drop it).
type AuditForwarder struct {
	targets []auditTarget
	timeout time.Duration
	log     *slog.Logger
}

// auditTarget is a webhook target: its URL and a client with its CA and
// bearer token.
type auditTarget struct {
	server string
	client *http.Client
}

// NewAuditForwarder forwards to the targets of the kubeconfig files,
// each with its server, CA and token, as kube-apiserver reads its one
// target's (--audit-webhook-config-file); a post to a target that takes
// longer than timeout fails.
func NewAuditForwarder(kubeconfigs []string, timeout time.Duration, log *slog.Logger) (*AuditForwarder, error) {
	if len(kubeconfigs) == 0 {
		return nil, errors.New("no target")
	}
	f := &AuditForwarder{timeout: timeout, log: log}
	for _, path := range kubeconfigs {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", path, err)
		}
		client, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", path, err)
		}
		f.targets = append(f.targets, auditTarget{server: cfg.Host, client: client})
	}
	return f, nil
}

// Run serves the API server's posts on listen until ctx is done, then
// lets the posts in flight finish.
func (f *AuditForwarder) Run(ctx context.Context, listen string) error {
	s := &http.Server{Handler: f, ReadHeaderTimeout: readyTimeout}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	stop := context.AfterFunc(ctx, func() {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
		defer cancel()
		_ = s.Shutdown(shutdown)
	})
	defer stop()
	if err := s.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// ServeHTTP forwards a post of the API server to every target.
func (f *AuditForwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "post audit events", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAuditBatch))
	if err != nil {
		http.Error(w, "read the events: "+err.Error(), http.StatusBadRequest)
		return
	}
	errs := make([]error, len(f.targets))
	var wg sync.WaitGroup
	for i, target := range f.targets {
		wg.Go(func() { errs[i] = f.post(r.Context(), target, r.Header.Get("Content-Type"), body) })
	}
	wg.Wait()
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Sprintf("target %d (%s): %v", i, f.targets[i].server, err))
		}
	}
	if len(failed) > 0 {
		msg := strings.Join(failed, "; ")
		f.log.Warn("audit events not taken", "targets", len(failed), "error", msg)
		http.Error(w, msg, http.StatusBadGateway)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// post posts body to target. Errors name the target's server and status,
// never its token, which the client adds below the request.
func (f *AuditForwarder) post(ctx context.Context, target auditTarget, contentType string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.server, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := target.client.Do(req)
	if err != nil {
		if why := netfail.Describe(err); why != "" {
			return errors.New(why)
		}
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}
