package rollout

import (
	"sync"
	"time"
)

// Gate hands the rollout of a change a release must roll to one control
// plane at a time across the fleet, and starts at most one per interval:
// the next control plane's turn comes once the one before is done and the
// interval since its start has passed. A control plane that does not come
// back holds the fleet's rollout, as a canary would. The turn lives in the
// controller's memory; after a restart the first control plane to ask takes
// it.
type Gate struct {
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	current string
	started time.Time
}

// NewGate is a Gate that starts a control plane's rollout at most once per
// interval.
func NewGate(interval time.Duration) *Gate {
	return &Gate{interval: interval, now: time.Now}
}

// Admit tells whether the control plane key may roll now, and takes the
// turn for it when it is free. When not, it says when to ask again.
func (g *Gate) Admit(key string) (bool, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.current == key {
		return true, 0
	}
	if g.current != "" {
		return false, min(g.interval, time.Minute)
	}
	if wait := g.started.Add(g.interval).Sub(g.now()); !g.started.IsZero() && wait > 0 {
		return false, wait
	}
	g.current, g.started = key, g.now()
	return true, 0
}

// Done ends key's turn, when it has it.
func (g *Gate) Done(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.current == key {
		g.current = ""
	}
}
