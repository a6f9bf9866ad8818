package envtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// env is the API server every test in this package shares; controller is the
// real cmd/controller binary serving the admission webhooks it calls.
var (
	env        *Env
	controller *Process
	binDir     string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if env, err = Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	if binDir, err = os.MkdirTemp("", "hcp-bin-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(binDir) }()
	if controller, err = startWebhookController(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if err := controller.Stop(30 * time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "controller did not stop cleanly: %v\n", err)
		return 1
	}
	return code
}

// startWebhookController runs cmd/controller as it runs in a cluster, with
// the serving certificate the webhook configurations trust.
func startWebhookController() (*Process, error) {
	bin, err := Build(env.Root, "./cmd/controller", binDir)
	if err != nil {
		return nil, err
	}
	health, err := FreePort()
	if err != nil {
		return nil, err
	}
	p, err := StartProcess(bin, []string{
		"KUBECONFIG=" + env.Kubeconfig,
		"WEBHOOK_CERT_DIR=" + env.WebhookCertDir(),
		fmt.Sprintf("WEBHOOK_PORT=%d", env.WebhookPort()),
		fmt.Sprintf("HEALTH_PROBE_BIND_ADDRESS=127.0.0.1:%d", health),
		"METRICS_BIND_ADDRESS=0",
		"LEADER_ELECTION=false",
		"LOG_FORMAT=text",
	})
	if err != nil {
		return nil, err
	}
	if err := p.WaitReady(fmt.Sprintf("http://127.0.0.1:%d/readyz", health), time.Minute); err != nil {
		_ = p.Stop(5 * time.Second)
		return nil, fmt.Errorf("controller: %w", err)
	}
	return p, nil
}

// testContext bounds each test's API calls.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
