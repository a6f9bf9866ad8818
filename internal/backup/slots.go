package backup

import (
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// grantTimeout is how long a slot handed to a waiting control plane stays
// its own before it goes to the next: its pass normally comes at once, but
// one that no longer wants a snapshot never takes it.
const grantTimeout = time.Minute

// slots hands out the right to take a snapshot: at most a fixed number at
// once across all control planes, and, while control planes wait, to their
// namespaces in turn, so that a tenant with many control planes due at once
// does not keep another tenant's waiting behind all of them. A namespace is
// a tenant.
//
// A control plane that finds no free slot is queued and told so at once;
// its reconcile ends instead of holding a worker. When a slot frees, it is
// granted to the first waiting control plane of the next namespace in turn
// and wake is called with it, so that its pass comes back and takes it.
type slots struct {
	wake func(types.NamespacedName)
	now  func() time.Time

	mu   sync.Mutex
	free int
	// waiting holds each namespace's waiting control planes in order.
	waiting map[string][]types.NamespacedName
	// turns are the namespaces with control planes waiting, the next to be
	// served first; the one served last is at the end.
	turns []string
	// last is the namespace a slot went to last.
	last string
	// granted are slots kept for control planes whose pass is to come.
	granted map[types.NamespacedName]time.Time
}

func newSlots(n int, wake func(types.NamespacedName)) *slots {
	return &slots{
		wake: wake, now: time.Now, free: n,
		waiting: map[string][]types.NamespacedName{}, granted: map[types.NamespacedName]time.Time{},
	}
}

// take gives cp a slot, with the func that returns it, or queues cp and
// returns false: wake(cp) tells when a slot is kept for it.
func (s *slots) take(cp types.NamespacedName) (release func(), ok bool) {
	s.mu.Lock()
	s.expire()
	_, ok = s.granted[cp]
	switch {
	case ok:
		delete(s.granted, cp)
	case s.free > 0 && len(s.turns) == 0:
		s.free--
		s.last = cp.Namespace
		ok = true
	default:
		s.enqueue(cp)
	}
	var woken []types.NamespacedName
	for _, w := range s.grant() {
		if w == cp {
			// Its turn came in this very pass (a kept slot expired).
			delete(s.granted, cp)
			ok = true
			continue
		}
		woken = append(woken, w)
	}
	s.mu.Unlock()
	for _, w := range woken {
		s.wake(w)
	}
	if !ok {
		return nil, false
	}
	var once sync.Once
	return func() { once.Do(s.release) }, true
}

func (s *slots) release() {
	s.mu.Lock()
	s.free++
	woken := s.grant()
	s.mu.Unlock()
	for _, w := range woken {
		s.wake(w)
	}
}

// enqueue adds cp to its namespace's waiting control planes. A namespace
// that starts waiting takes its turn before the one served last, which
// has just had its turn.
func (s *slots) enqueue(cp types.NamespacedName) {
	queue, queued := s.waiting[cp.Namespace]
	for _, w := range queue {
		if w == cp {
			return
		}
	}
	s.waiting[cp.Namespace] = append(queue, cp)
	if queued {
		return
	}
	if n := len(s.turns); n > 0 && s.turns[n-1] == s.last {
		s.turns = append(s.turns[:n-1], cp.Namespace, s.last)
		return
	}
	s.turns = append(s.turns, cp.Namespace)
}

// grant keeps the free slots for the next waiting control planes, one per
// namespace in turn, and returns them.
func (s *slots) grant() []types.NamespacedName {
	var woken []types.NamespacedName
	for s.free > 0 && len(s.turns) > 0 {
		ns := s.turns[0]
		queue := s.waiting[ns]
		cp := queue[0]
		s.turns = s.turns[1:]
		if len(queue) == 1 {
			delete(s.waiting, ns)
		} else {
			s.waiting[ns] = queue[1:]
			s.turns = append(s.turns, ns)
		}
		s.free--
		s.last = ns
		s.granted[cp] = s.now()
		woken = append(woken, cp)
	}
	return woken
}

// expire frees the slots kept for control planes that did not come back.
func (s *slots) expire() {
	for cp, at := range s.granted {
		if s.now().Sub(at) > grantTimeout {
			delete(s.granted, cp)
			s.free++
		}
	}
}

// quickWorkers are the backup controller's workers beyond its snapshot
// slots: a snapshot holds its worker while it runs, and these serve every
// pass that takes none (due times, passes told to wait for a slot, restores,
// deferred requests) meanwhile.
const quickWorkers = 4

// errWaitingForSlot tells a pass that its snapshot waits for a slot; the
// slot kept for it brings it back.
var errWaitingForSlot = errors.New("waiting for a free snapshot slot")
