package probes

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func next(t *testing.T, p *Pool) types.NamespacedName {
	t.Helper()
	select {
	case e := <-p.Events():
		return e.Object
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return types.NamespacedName{}
	}
}

// The first answer and every change between answering and not come back
// as events; until then, and while the newest answer is fresh, an ask
// returns what is held without asking again.
func TestAnswersComeBackAsEvents(t *testing.T) {
	p := NewPool(2)
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	var asked atomic.Int32
	answer := func(err error) func(context.Context) error {
		return func(context.Context) error { asked.Add(1); return err }
	}
	_, ok := p.Answer(key, time.Second, time.Now(), answer(nil))
	assert.False(t, ok, "no answer before the first ask ends")
	assert.Equal(t, key, next(t, p))
	a, ok := p.Answer(key, time.Minute, time.Now(), answer(errors.New("never asked")))
	require.True(t, ok)
	require.NoError(t, a.Err)
	assert.Equal(t, int32(1), asked.Load(), "a fresh answer is not asked again")

	// Stale: the held answer is returned, a new ask goes out, and its
	// failure is an event.
	a, ok = p.Answer(key, time.Minute, time.Now().Add(2*time.Minute), answer(errors.New("refused")))
	require.True(t, ok)
	require.NoError(t, a.Err, "the held answer until the new one is in")
	assert.Equal(t, key, next(t, p))
	a, _ = p.Answer(key, time.Minute, time.Now(), nil)
	assert.EqualError(t, a.Err, "refused")

	// The same failure again is no event.
	p.Answer(key, time.Minute, time.Now().Add(2*time.Minute), answer(errors.New("refused")))
	require.Eventually(t, func() bool {
		a, _ := p.Answer(key, time.Minute, time.Now(), nil)
		return time.Since(a.At) < time.Second && asked.Load() == 3
	}, 10*time.Second, 10*time.Millisecond)
	select {
	case e := <-p.Events():
		t.Fatalf("an event for an answer that did not change: %v", e.Object)
	case <-time.After(100 * time.Millisecond):
	}
}

// Asks that hang hold the Pool's goroutines, never the caller: Answer
// returns at once while every goroutine waits, and the ask queued behind
// them runs once one is free.
func TestHangingAsksHoldOnlyThePool(t *testing.T) {
	p := NewPool(2)
	release := make(chan struct{})
	hang := func(context.Context) error { <-release; return errors.New("timed out") }
	for _, name := range []string{"hangs-1", "hangs-2"} {
		p.Answer(types.NamespacedName{Name: name}, time.Second, time.Now(), hang)
	}
	healthy := types.NamespacedName{Name: "healthy"}
	_, ok := p.Answer(healthy, time.Second, time.Now(), func(context.Context) error { return nil })
	assert.False(t, ok, "returned while both goroutines hang")
	close(release)
	seen := map[string]bool{}
	for range 3 {
		seen[next(t, p).Name] = true
	}
	assert.Equal(t, map[string]bool{"hangs-1": true, "hangs-2": true, "healthy": true}, seen)
	a, ok := p.Answer(healthy, time.Minute, time.Now(), nil)
	require.True(t, ok)
	assert.NoError(t, a.Err)
}

// A control plane forgotten (deleted) holds no answer, and one asked again
// starts afresh.
func TestForget(t *testing.T) {
	p := NewPool(1)
	key := types.NamespacedName{Name: "gone"}
	p.Answer(key, time.Second, time.Now(), func(context.Context) error { return nil })
	next(t, p)
	p.Forget(key)
	_, ok := p.Answer(key, time.Second, time.Now(), func(context.Context) error { return nil })
	assert.False(t, ok)
	assert.Equal(t, key, next(t, p), "the first answer after forgetting is an event again")
}
