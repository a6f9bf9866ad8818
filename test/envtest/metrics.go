package envtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MetricsReaderNamespace and MetricsReader are the namespace and
// ServiceAccount of config/prometheus/rbac.yaml, which may read /metrics.
const (
	MetricsReaderNamespace = "hosted-control-plane-system"
	MetricsReader          = "hcp-metrics-reader"
)

// MetricsToken installs config/prometheus/rbac.yaml, the RBAC the PodMonitor
// scrapes with, and returns a token of its ServiceAccount. The PodMonitor
// reads the token from the Secret of type service-account-token there; no
// token controller runs here to fill it, so the token comes from the
// TokenRequest API, for the same ServiceAccount.
func (e *Env) MetricsToken(ctx context.Context) (string, error) {
	if err := e.applyOnce(ctx, filepath.Join(e.Root, "config", "prometheus", "rbac.yaml")); err != nil {
		return "", err
	}
	return e.Token(ctx, MetricsReaderNamespace, MetricsReader)
}

// Token is a token of a ServiceAccount from the TokenRequest API, valid
// for six hours: longer than the longest benchmark window
// (BENCH_IDLE_WINDOW), whose last scrape uses the token of its first.
func (e *Env) Token(ctx context.Context, ns, name string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](6 * 3600)}}
	if err := e.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", fmt.Errorf("token of ServiceAccount %s/%s: %w", ns, name, err)
	}
	return req.Status.Token, nil
}

// applyOnce creates the namespace hosted-control-plane-system and every
// object of a YAML file that does not exist yet.
func (e *Env) applyOnce(ctx context.Context, path string) error {
	err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: MetricsReaderNamespace}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj, err := DecodeObject(d)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := e.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: %s %s: %w", path, obj.GetKind(), client.ObjectKeyFromObject(obj), err)
		}
	}
}

// Scrape reads the metrics at url as Prometheus does with the PodMonitor of
// config/prometheus: over HTTPS, not verifying the certificate the binary
// made for itself, with token (none when empty). It returns the status code
// and the body.
func Scrape(ctx context.Context, url, token string) (int, string, error) {
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the PodMonitor
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
