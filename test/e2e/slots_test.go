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
	"TestWorkerJoins",                        // 880-1,350 s
	"TestGatewaySharedByTwoClusters",         // 100 s, before the tests that use the Gateway it deletes
	"TestEtcdMembership",                     // 340-640 s
	"TestHostedControlPlane",                 // 550-570 s
	"TestConformance",                        // 240 s (CONFORMANCE=ci)
	"TestEtcdNoSpace",                        // 130-180 s
	"TestWorkerJoinsBehindALoadBalancerName", // 90-190 s
	"TestWorkerJoinsThroughGateway",          // 140-150 s
	"TestClusterClassUpgrade",                // 100-130 s
	"TestGatewayProblemsAndRecovery",         // 50-90 s
	"TestNodePortExposure",                   // 70 s
}

// suiteSlots are one more than the machine has CPUs: the tests beside each
// other spend most of their time waiting for pods, rollouts and rotations,
// and their control planes share the CPUs. Measured on a 2-core machine
// (2026-12-07): with two slots the CPUs were idle about 45% of the time and
// the suite took 1,170 s; with three, idle 5 to 40% (about 17% on average),
// the suite took 891 s, and TestWorkerJoins, the longest, 736 s against
// 694 (its cluster CA rotation 231 s against 204). An earlier measurement
// (2026-11-30), when the suite's control planes kept the CPUs busier, found
// a third slot doubling that test's service account key rotation.
var suiteSlots = slots.New(fmt.Sprintf("one of the suite's %d slots", runtime.GOMAXPROCS(0)+1), runtime.GOMAXPROCS(0)+1, longestFirst)

// parallel is t.Parallel, after which t waits for a slot, which it gives
// back when it ends, and for what it claims to be free (see sharedGateway).
// go test's own -parallel must be at least the number of these tests (make
// test-e2e sets it) for the order to be this one.
func parallel(t *testing.T, claims ...slots.Claim) {
	t.Parallel()
	suiteSlots.Acquire(t, claims...)
}

// sharedGateway is what the tests that serve a cluster through the shared
// Gateway use (slots.Uses), and TestGatewaySharedByTwoClusters changes
// (slots.Changes): it deletes the Gateway under its clusters and creates it
// again, which would fail the others' requests. Ranked before them, it
// waits for none of them.
const sharedGateway = "the shared Gateway"
