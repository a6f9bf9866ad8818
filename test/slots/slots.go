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
	settled bool
	waiting []waiter
	// users counts the running tests that use each group; changing holds
	// the groups a running test changes.
	users    map[string]int
	changing map[string]bool
}

type waiter struct {
	rank   int
	claims []Claim
	run    chan struct{}
}

// Claim is what a test needs of something the tests of a suite share (a
// group): to use it, beside the others that use it, or to change it, beside
// no test that uses or changes it.
type Claim struct {
	group   string
	changes bool
}

// Uses claims group for a test that relies on it staying as it is.
func Uses(group string) Claim { return Claim{group: group} }

// Changes claims group for a test that changes it under the tests that use
// it. Ranked before them, it waits for none of them; ranked after, it waits
// until none runs, while the tests ranked after it may take the free slots.
func Changes(group string) Claim { return Claim{group: group, changes: true} }

// settle is how long the first test waits for the others go test releases
// with it, so that the first slots go to the longest.
const settle = time.Second

// New returns total slots; what names them in the line a test logs once it
// has one ("one of the suite's 2 slots"). longestFirst names tests longest
// first, and one not named comes after them.
func New(what string, total int, longestFirst []string) *Slots {
	return &Slots{what: what, free: max(total, 1), longestFirst: longestFirst, users: map[string]int{}, changing: map[string]bool{}}
}

// Acquire waits for a slot, which t gives back when it ends, and for what
// t claims to be free (see Claim). It logs how long t waited: go test
// counts the wait in the test's time, and hack/test-times.sh takes it off by
// that line.
func (s *Slots) Acquire(t testing.TB, claims ...Claim) {
	rank := slices.Index(s.longestFirst, t.Name())
	if rank < 0 {
		rank = len(s.longestFirst)
	}
	w := waiter{rank: rank, claims: claims, run: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, w)
	settled := s.settled
	if !s.started {
		s.started = true
		time.AfterFunc(settle, func() {
			s.mu.Lock()
			s.settled = true
			s.mu.Unlock()
			s.dispatch()
		})
	}
	s.mu.Unlock()
	if settled {
		// A test that comes after the first ones (go test -count, or one
		// released late) is dispatched at once: no slot's release may
		// come to do it.
		s.dispatch()
	}
	start := time.Now()
	<-w.run
	t.Logf("%s waited %d s for %s", t.Name(), int(time.Since(start).Seconds()), s.what)
	t.Cleanup(func() {
		s.mu.Lock()
		s.free++
		for _, c := range claims {
			if c.changes {
				delete(s.changing, c.group)
			} else {
				s.users[c.group]--
			}
		}
		s.mu.Unlock()
		s.dispatch()
	})
}

// claimable tells whether what w claims is free; s.mu is held.
func (s *Slots) claimable(w waiter) bool {
	return !slices.ContainsFunc(w.claims, func(c Claim) bool {
		return s.changing[c.group] || c.changes && s.users[c.group] > 0
	})
}

// dispatch lets the highest-ranked waiting tests whose claims are free run
// while slots are.
func (s *Slots) dispatch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.free > 0 {
		next := -1
		for i, w := range s.waiting {
			if (next < 0 || w.rank < s.waiting[next].rank) && s.claimable(w) {
				next = i
			}
		}
		if next < 0 {
			return
		}
		for _, c := range s.waiting[next].claims {
			if c.changes {
				s.changing[c.group] = true
			} else {
				s.users[c.group]++
			}
		}
		close(s.waiting[next].run)
		s.waiting = slices.Delete(s.waiting, next, next+1)
		s.free--
	}
}
