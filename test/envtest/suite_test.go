package envtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// env is the API server every test in this package shares; controller is the
// real cmd/controller binary serving the admission webhooks it calls; and
// cert-manager's controllers run in this process against env, issuing what
// Certificates ask for.
var (
	env        *Env
	controller *Process
	binDir     string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	var err error
	if env, err = Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	stopCertManager, err := StartCertManager(context.Background(), env.Kubeconfig, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Deferred after env.Stop, so it runs before it: cert-manager stops while
	// the API server still answers.
	defer func() {
		if err := stopCertManager(); err != nil {
			fmt.Fprintf(os.Stderr, "cert-manager did not stop cleanly: %v\n", err)
			code = 1
		}
	}()
	if binDir, err = os.MkdirTemp("", "hcp-bin-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(binDir) }()
	if controller, err = env.StartController(binDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code = m.Run()
	// A controller that outlasts 30s after SIGTERM is killed and told, not
	// failed, as in stopController.
	if err := controller.Stop(30 * time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "controller did not stop cleanly: %.300s\n", err)
	}
	return code
}

// testContext bounds each test's API calls.
func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
