package slots

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// Slots lets tests run, as many at once as free, in the order of
// longestFirst. It is safe for concurrent use.
type Slots struct {
	what         string
	longestFirst []string

	mu      sync.Mutex
	free    int
	started bool
	waiting []waiter
	// held counts the running tests that named each group.
	held map[string]int
}

type waiter struct {
	rank   int
	groups []string
	run    chan struct{}
}

// settle is how long the first test waits for the others go test releases
// with it, so that the first slots go to the longest.
const settle = time.Second

// New returns total slots; what names them in the line a test logs once it
// has one ("one of the suite's 2 slots"). longestFirst names tests longest
// first, and one not named comes after them.
func New(what string, total int, longestFirst []string) *Slots {
	return &Slots{what: what, free: max(total, 1), longestFirst: longestFirst, held: map[string]int{}}
}

// Acquire waits for a slot, which t gives back when it ends. A test that
// names groups runs beside no other test that names one of them (such as a
// test that deletes what another relies on, and that other), and while it
// cannot start, a test ranked after it may take a free slot. It logs how
// long t waited: go test counts the wait in the test's time, and
// hack/test-times.sh takes it off by that line.
func (s *Slots) Acquire(t testing.TB, groups ...string) {
	rank := slices.Index(s.longestFirst, t.Name())
	if rank < 0 {
		rank = len(s.longestFirst)
	}
	w := waiter{rank: rank, groups: groups, run: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, w)
	if !s.started {
		s.started = true
		time.AfterFunc(settle, s.dispatch)
	}
	s.mu.Unlock()
	start := time.Now()
	<-w.run
	t.Logf("%s waited %d s for %s", t.Name(), int(time.Since(start).Seconds()), s.what)
	t.Cleanup(func() {
		s.mu.Lock()
		s.free++
		for _, g := range groups {
			s.held[g]--
		}
		s.mu.Unlock()
		s.dispatch()
	})
}

// dispatch lets the highest-ranked waiting tests that no running test
// excludes run while slots are free.
func (s *Slots) dispatch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.free > 0 {
		next := -1
		for i, w := range s.waiting {
			if (next < 0 || w.rank < s.waiting[next].rank) && !slices.ContainsFunc(w.groups, func(g string) bool { return s.held[g] > 0 }) {
				next = i
			}
		}
		if next < 0 {
			return
		}
		for _, g := range s.waiting[next].groups {
			s.held[g]++
		}
		close(s.waiting[next].run)
		s.waiting = slices.Delete(s.waiting, next, next+1)
		s.free--
	}
}
