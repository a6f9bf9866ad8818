package envtest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/hostedcp/cluster-api-provider-hosted/test/slots"
)

// Every test begins with serial, parallel or hosted, its lane
// (TestEveryTestHasALane). Serial tests change what every test of env shares
// (env, the shared controller's settings or binary), run a second
// controller that serves every namespace of env, or wait until the whole
// controller is quiet: go test runs those first, one at a time, and then the
// parallel ones side by side, as many as -parallel (each test has a
// namespace of its own). Of those, the ones that run hosted API servers and
// etcd members as processes take one of hostedSlots first (hosted).
//
// ENVTEST_LANE=serial runs only the serial tests and ENVTEST_LANE=parallel
// only the others, each process with an env of its own: make envtest runs
// the two at once, so that the serial tests no longer hold the parallel ones
// back (hack/envtest.sh). Without it, one process runs them all.
//
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
	if lane != "" && lane != "serial" && lane != "parallel" {
		fmt.Fprintf(os.Stderr, "ENVTEST_LANE=%q: want serial, parallel or nothing (both)\n", lane)
		return 1
	}
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

// hostedSlots are as many as the machine has CPUs: a hosted API server
// takes most of one while it starts and while a rotation rolls it, and more
// of them at once leave the shared API server and the controller too little
// to answer within the tests' timeouts. Of those go test has released
// (-parallel bounds them), the longest go first.
var hostedSlots = slots.New(fmt.Sprintf("one of the %d slots for hosted API servers", runtime.GOMAXPROCS(0)), runtime.GOMAXPROCS(0), []string{
	"TestEmergencyRotation",                        // 230-270 s alone
	"TestEncryptionKeyRotation",                    // 110 s
	"TestServiceAccountKeyRotation",                // 80 s
	"TestEncryptionAtRest",                         // 80 s
	"TestManagementServiceAccounts",                // 60 s
	"TestMetricsDashboardAndAlerts",                // 40 s
	"TestKubernetesServiceBehindALoadBalancerName", // 25 s
})

// hosted is parallel, after which t waits for one of hostedSlots, which it
// holds until it ends; a test that runs hosted API servers or etcd members
// calls it first, before any of its timeouts start.
func hosted(t *testing.T) {
	t.Helper()
	parallel(t)
	hostedSlots.Acquire(t)
}

// lane is ENVTEST_LANE: which of the package's tests this process runs.
var lane = os.Getenv("ENVTEST_LANE")

// serial skips t in the parallel lane; the serial lane and a process without
// a lane run it alone.
func serial(t *testing.T) {
	t.Helper()
	if lane == "parallel" {
		t.Skip("a serial test: ENVTEST_LANE=serial runs it")
	}
}

// parallel skips t in the serial lane; otherwise t runs beside the other
// parallel tests (t.Parallel).
func parallel(t *testing.T) {
	t.Helper()
	if lane == "serial" {
		t.Skip("a parallel test: ENVTEST_LANE=parallel runs it")
	}
	t.Parallel()
}

// testContext bounds each test's API calls.
func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
