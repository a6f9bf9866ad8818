package probes

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// Answer is what an ask found (Err nil when it answered) and when the ask
// started: what it found is at least that fresh.
type Answer[T any] struct {
	Value T
	Err   error
	At    time.Time
}

// Answered tells whether two answers agree on answering at all, for asks
// whose only news is that (an API server's /readyz).
func Answered[T any](before, after Answer[T]) bool {
	return (before.Err == nil) == (after.Err == nil)
}

// Pool asks, in a bounded number of goroutines, and keeps the newest
// answer of each key. It is safe for concurrent use.
type Pool[T any] struct {
	workers int
	same    func(before, after Answer[T]) bool
	events  chan event.TypedGenericEvent[types.NamespacedName]
	start   sync.Once

	mu      sync.Mutex
	wake    *sync.Cond
	queue   []types.NamespacedName
	entries map[types.NamespacedName]*entry[T]
}

// entry is what the Pool holds of one key.
type entry[T any] struct {
	// ask is the newest way to ask given (it may carry newer credentials),
	// and ctx the context of the one who gave it, without its end.
	ask             func(context.Context) (T, error)
	ctx             context.Context
	queued, running bool
	answer          *Answer[T]
	// after outdates the answers of asks started before it.
	after time.Time
}

// usable tells whether the entry holds an answer that is not outdated.
func (e *entry[T]) usable() bool { return e.answer != nil && !e.answer.At.Before(e.after) }

// NewPool returns a Pool that asks at most workers at once; same tells
// whether a new answer brings no news over the one before (no event).
// Its goroutines start with the first ask and run for the life of the
// process.
func NewPool[T any](workers int, same func(before, after Answer[T]) bool) *Pool[T] {
	p := &Pool[T]{
		workers: max(workers, 1),
		same:    same,
		events:  make(chan event.TypedGenericEvent[types.NamespacedName], 1024),
		entries: map[types.NamespacedName]*entry[T]{},
	}
	p.wake = sync.NewCond(&p.mu)
	return p
}

// Events are the keys whose answer is news: the first usable one, or one
// that same tells differs from the one before.
func (p *Pool[T]) Events() <-chan event.TypedGenericEvent[types.NamespacedName] { return p.events }

// Answer returns the newest usable answer for key (false when there is
// none) and, when there is none or it is older than fresh at now, has ask
// run for key, unless an ask for it is queued or under way; a queued ask
// runs as the newest one given (nil: the one given before), with the values
// of the ctx given with it (its span, so that a trace shows the ask below
// the pass that asked, its logger) but never its deadline or cancellation:
// the ask outlives the pass, bounded by its own timeouts.
func (p *Pool[T]) Answer(ctx context.Context, key types.NamespacedName, fresh time.Duration, now time.Time, ask func(context.Context) (T, error)) (Answer[T], bool) {
	p.start.Do(func() {
		for range p.workers {
			go p.work()
		}
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[key]
	if e == nil {
		e = &entry[T]{}
		p.entries[key] = e
	}
	if ask != nil {
		e.ask, e.ctx = ask, context.WithoutCancel(ctx)
	}
	if e.usable() && now.Sub(e.answer.At) < fresh {
		return *e.answer, true
	}
	if e.ask != nil {
		p.enqueue(key, e)
	}
	if !e.usable() {
		return Answer[T]{}, false
	}
	return *e.answer, true
}

// Outdate makes the answers of asks started before at unusable (for an
// answer that something done since may have changed), and asks again.
func (p *Pool[T]) Outdate(key types.NamespacedName, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[key]
	if e == nil || !at.After(e.after) {
		return
	}
	e.after = at
	if !e.usable() && e.ask != nil {
		p.enqueue(key, e)
	}
}

// enqueue has e asked, unless it is queued or under way; p.mu is held.
func (p *Pool[T]) enqueue(key types.NamespacedName, e *entry[T]) {
	if e.queued || e.running {
		return
	}
	e.queued = true
	p.queue = append(p.queue, key)
	p.wake.Signal()
}

// Forget drops what the Pool holds of key; an ask under way still ends,
// and its answer is dropped.
func (p *Pool[T]) Forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.entries, key)
}

func (p *Pool[T]) work() {
	for {
		p.mu.Lock()
		for len(p.queue) == 0 {
			p.wake.Wait()
		}
		key := p.queue[0]
		p.queue = p.queue[1:]
		e := p.entries[key]
		if e == nil || !e.queued {
			p.mu.Unlock()
			continue // forgotten
		}
		e.queued, e.running = false, true
		ask, ctx := e.ask, e.ctx
		p.mu.Unlock()

		at := time.Now()
		v, err := ask(ctx)
		p.done(key, e, Answer[T]{Value: v, Err: err, At: at})
	}
}

// done keeps an answer and tells of it when it is news. An answer
// outdated while it was asked is kept for nothing: it is asked again.
func (p *Pool[T]) done(key types.NamespacedName, e *entry[T], a Answer[T]) {
	p.mu.Lock()
	if p.entries[key] != e {
		p.mu.Unlock()
		return // forgotten meanwhile
	}
	e.running = false
	if a.At.Before(e.after) {
		p.enqueue(key, e)
		p.mu.Unlock()
		return
	}
	news := !e.usable() || !p.same(*e.answer, a)
	e.answer = &a
	p.mu.Unlock()
	if news {
		p.events <- event.TypedGenericEvent[types.NamespacedName]{Object: key}
	}
}
