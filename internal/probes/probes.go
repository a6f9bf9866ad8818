package probes

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// Answer is what an ask found: nil when it answered, and when.
type Answer struct {
	Err error
	At  time.Time
}

// Pool asks, in a bounded number of goroutines, and keeps the newest
// answer of each key. It is safe for concurrent use.
type Pool struct {
	workers int
	events  chan event.TypedGenericEvent[types.NamespacedName]
	start   sync.Once

	mu      sync.Mutex
	wake    *sync.Cond
	queue   []types.NamespacedName
	pending map[types.NamespacedName]func(context.Context) error
	running map[types.NamespacedName]bool
	answers map[types.NamespacedName]Answer
}

// NewPool returns a Pool that asks at most workers at once. Its
// goroutines start with the first ask and run for the life of the process.
func NewPool(workers int) *Pool {
	p := &Pool{
		workers: max(workers, 1),
		events:  make(chan event.TypedGenericEvent[types.NamespacedName], 1024),
		pending: map[types.NamespacedName]func(context.Context) error{},
		running: map[types.NamespacedName]bool{},
		answers: map[types.NamespacedName]Answer{},
	}
	p.wake = sync.NewCond(&p.mu)
	return p
}

// Events are the keys whose answer is new: the first, or one that answers
// where the one before did not, or the reverse.
func (p *Pool) Events() <-chan event.TypedGenericEvent[types.NamespacedName] { return p.events }

// Answer returns the newest answer for key (false when there is none yet)
// and, when there is none or it is older than fresh at now, has ask run
// for key, unless an ask for it is under way; an ask waiting its turn is
// replaced by this one (which may carry newer credentials).
func (p *Pool) Answer(key types.NamespacedName, fresh time.Duration, now time.Time, ask func(context.Context) error) (Answer, bool) {
	p.start.Do(func() {
		for range p.workers {
			go p.work()
		}
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.answers[key]
	if ok && now.Sub(a.At) < fresh {
		return a, true
	}
	if p.running[key] {
		return a, ok
	}
	if _, queued := p.pending[key]; !queued {
		p.queue = append(p.queue, key)
		p.wake.Signal()
	}
	p.pending[key] = ask
	return a, ok
}

// Forget drops what the Pool holds of key; an ask under way still ends,
// and its answer is dropped.
func (p *Pool) Forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.answers, key)
	delete(p.pending, key)
	delete(p.running, key)
}

func (p *Pool) work() {
	for {
		p.mu.Lock()
		for len(p.queue) == 0 {
			p.wake.Wait()
		}
		key := p.queue[0]
		p.queue = p.queue[1:]
		ask, ok := p.pending[key]
		delete(p.pending, key)
		if !ok {
			p.mu.Unlock()
			continue // forgotten
		}
		p.running[key] = true
		p.mu.Unlock()

		err := ask(context.Background())
		p.done(key, Answer{Err: err, At: time.Now()})
	}
}

// done keeps an answer and tells of it when it is new.
func (p *Pool) done(key types.NamespacedName, a Answer) {
	p.mu.Lock()
	if !p.running[key] {
		p.mu.Unlock()
		return // forgotten meanwhile
	}
	delete(p.running, key)
	before, had := p.answers[key]
	p.answers[key] = a
	p.mu.Unlock()
	if !had || (before.Err == nil) != (a.Err == nil) {
		p.events <- event.TypedGenericEvent[types.NamespacedName]{Object: key}
	}
}
