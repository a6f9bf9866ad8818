package e2e

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// longestFirst ranks the tests that run beside each other by how long each
// took in a full run on a 2-core machine, longest first: started in this
// order, the long ones do not end up alone at the end of the suite. A test
// not listed comes after them.
var longestFirst = []string{
	"TestWorkerJoins",                        // 820-1,200 s
	"TestEtcdMembership",                     // 340-640 s
	"TestHostedControlPlane",                 // 550-570 s
	"TestEtcdNoSpace",                        // 130 s
	"TestWorkerJoinsBehindALoadBalancerName", // 90-120 s
	"TestGatewaySharedByTwoClusters",         // 100 s
	"TestGatewayProblemsAndRecovery",         // 50-90 s
	"TestNodePortExposure",                   // 70 s
}

// suiteSlots are as many as the machine has CPUs: the tests beside each other
// mostly wait for pods, but their control planes share the CPUs.
var suiteSlots = &slots{total: runtime.GOMAXPROCS(0), free: runtime.GOMAXPROCS(0)}

// slots lets tests run, as many at once as free, in the order of
// longestFirst.
type slots struct {
	total   int
	mu      sync.Mutex
	free    int
	started bool
	waiting []waiter
}

type waiter struct {
	rank int
	run  chan struct{}
}

// settle is how long the first test waits for the others go test releases
// with it, so that the first slots go to the longest.
const settle = time.Second

// parallel is t.Parallel, after which t waits for a slot, which it gives
// back when it ends. go test's own -parallel must be at least the number of
// these tests (make test-e2e sets it) for the order to be this one.
func parallel(t *testing.T) {
	t.Parallel()
	suiteSlots.acquire(t)
}

func (s *slots) acquire(t *testing.T) {
	rank := slices.Index(longestFirst, t.Name())
	if rank < 0 {
		rank = len(longestFirst)
	}
	w := waiter{rank: rank, run: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, w)
	if !s.started {
		s.started = true
		time.AfterFunc(settle, s.dispatch)
	}
	s.mu.Unlock()
	start := time.Now()
	<-w.run
	// go test counts the wait in the test's time; hack/test-times.sh takes
	// it off by this line.
	t.Logf("%s waited %d s for one of the suite's %d slots", t.Name(), int(time.Since(start).Seconds()), s.total)
	t.Cleanup(func() {
		s.mu.Lock()
		s.free++
		s.mu.Unlock()
		s.dispatch()
	})
}

// dispatch lets the highest-ranked waiting tests run while slots are free.
func (s *slots) dispatch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.free > 0 && len(s.waiting) > 0 {
		next := 0
		for i, w := range s.waiting {
			if w.rank < s.waiting[next].rank {
				next = i
			}
		}
		close(s.waiting[next].run)
		s.waiting = slices.Delete(s.waiting, next, next+1)
		s.free--
	}
}
