package e2e

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/hostedcp/cluster-api-provider-hosted/test/slots"
)

// longestFirst ranks the tests that run beside each other by how long each
// took in a full run on a 2-core machine, longest first: started in this
// order, the long ones do not end up alone at the end of the suite. A test
// not listed comes after them.
var longestFirst = []string{
	"TestWorkerJoins",                        // 880-1,300 s
	"TestEtcdMembership",                     // 340-640 s
	"TestHostedControlPlane",                 // 550-570 s
	"TestConformance",                        // 240 s (CONFORMANCE=ci)
	"TestEtcdNoSpace",                        // 130 s
	"TestWorkerJoinsBehindALoadBalancerName", // 90-120 s
	"TestGatewaySharedByTwoClusters",         // 100 s
	"TestGatewayProblemsAndRecovery",         // 50-90 s
	"TestNodePortExposure",                   // 70 s
}

// suiteSlots are as many as the machine has CPUs: the tests beside each other
// mostly wait for pods, but their control planes share the CPUs.
var suiteSlots = slots.New(fmt.Sprintf("one of the suite's %d slots", runtime.GOMAXPROCS(0)), runtime.GOMAXPROCS(0), longestFirst)

// parallel is t.Parallel, after which t waits for a slot, which it gives
// back when it ends. go test's own -parallel must be at least the number of
// these tests (make test-e2e sets it) for the order to be this one.
func parallel(t *testing.T) {
	t.Parallel()
	suiteSlots.Acquire(t)
}
