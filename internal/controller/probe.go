package controller

import (
	"context"
	"fmt"
	"net"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Prober tells whether an API server answers through a kubeconfig.
type Prober interface {
	Probe(ctx context.Context, kubeconfig []byte) error
}

// ReadyzProber asks the API server's /readyz with the kubeconfig's
// credentials, within a few seconds.
type ReadyzProber struct{ Timeout time.Duration }

// Probe returns nil when /readyz answers ok.
func (p ReadyzProber) Probe(ctx context.Context, kubeconfig []byte) error {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return fmt.Errorf("parse kubeconfig: %w", err)
	}
	cfg.Timeout = p.Timeout
	// A connection of its own, closed afterwards: a pooled one can outlive
	// the path it came through (a Gateway keeps splicing an open connection
	// after its route is gone), and the question is whether clients get in.
	cfg.Dial = (&net.Dialer{Timeout: p.Timeout}).DialContext
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	defer utilnet.CloseIdleConnectionsFor(httpClient.Transport)
	// Traced around the transport whose connections are closed above.
	httpClient.Transport = otelhttp.NewTransport(httpClient.Transport)
	client, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("GET %s/readyz: %w", cfg.Host, err)
	}
	if string(body) != "ok" {
		return fmt.Errorf("GET %s/readyz: %s", cfg.Host, body)
	}
	return nil
}
