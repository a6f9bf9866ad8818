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

// The first answer and every change between answering and not come back
// as events; until then, and while the newest answer is fresh, an ask
// returns what is held without asking again.
func TestAnswersComeBackAsEvents(t *testing.T) {
	p := NewPool(2, Answered[struct{}])
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	var asked atomic.Int32
	answer := func(err error) func(context.Context) (struct{}, error) {
		return func(context.Context) (struct{}, error) { asked.Add(1); return struct{}{}, err }
	}
	_, ok := p.Answer(t.Context(), key, time.Second, time.Now(), answer(nil))
	assert.False(t, ok, "no answer before the first ask ends")
	assert.Equal(t, key, nextOf(t, p))
	a, ok := p.Answer(t.Context(), key, time.Minute, time.Now(), answer(errors.New("never asked")))
	require.True(t, ok)
	require.NoError(t, a.Err)
	assert.Equal(t, int32(1), asked.Load(), "a fresh answer is not asked again")

	// Stale: the held answer is returned, a new ask goes out, and its
	// failure is an event.
	a, ok = p.Answer(t.Context(), key, time.Minute, time.Now().Add(2*time.Minute), answer(errors.New("refused")))
	require.True(t, ok)
	require.NoError(t, a.Err, "the held answer until the new one is in")
	assert.Equal(t, key, nextOf(t, p))
	a, _ = p.Answer(t.Context(), key, time.Minute, time.Now(), nil)
	assert.EqualError(t, a.Err, "refused")

	// The same failure again is no event.
	p.Answer(t.Context(), key, time.Minute, time.Now().Add(2*time.Minute), answer(errors.New("refused")))
	require.Eventually(t, func() bool {
		a, _ := p.Answer(t.Context(), key, time.Minute, time.Now(), nil)
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
	p := NewPool(2, Answered[struct{}])
	release := make(chan struct{})
	hang := func(context.Context) (struct{}, error) { <-release; return struct{}{}, errors.New("timed out") }
	for _, name := range []string{"hangs-1", "hangs-2"} {
		p.Answer(t.Context(), types.NamespacedName{Name: name}, time.Second, time.Now(), hang)
	}
	healthy := types.NamespacedName{Name: "healthy"}
	_, ok := p.Answer(t.Context(), healthy, time.Second, time.Now(), answers)
	assert.False(t, ok, "returned while both goroutines hang")
	close(release)
	seen := map[string]bool{}
	for range 3 {
		seen[nextOf(t, p).Name] = true
	}
	assert.Equal(t, map[string]bool{"hangs-1": true, "hangs-2": true, "healthy": true}, seen)
	a, ok := p.Answer(t.Context(), healthy, time.Minute, time.Now(), nil)
	require.True(t, ok)
	assert.NoError(t, a.Err)
}

// A control plane forgotten (deleted) holds no answer, and one asked again
// starts afresh.
func TestForget(t *testing.T) {
	p := NewPool(1, Answered[struct{}])
	key := types.NamespacedName{Name: "gone"}
	p.Answer(t.Context(), key, time.Second, time.Now(), answers)
	nextOf(t, p)
	p.Forget(key)
	_, ok := p.Answer(t.Context(), key, time.Second, time.Now(), answers)
	assert.False(t, ok)
	assert.Equal(t, key, nextOf(t, p), "the first answer after forgetting is an event again")
}

func answers(context.Context) (struct{}, error) { return struct{}{}, nil }

// An answer asked before something that may have changed it (a membership
// change made meanwhile) is not returned; the ask under way then is asked
// again, and the first answer asked since is an event.
func TestOutdatedAnswersAreAskedAgain(t *testing.T) {
	p := NewPool(1, func(before, after Answer[int]) bool { return before.Value == after.Value })
	key := types.NamespacedName{Name: "changed"}
	release := make(chan struct{})
	var asked atomic.Int32
	ask := func(context.Context) (int, error) {
		n := asked.Add(1)
		if n == 2 {
			<-release // under way while the change is made
		}
		return 1, nil
	}
	p.Answer(t.Context(), key, time.Minute, time.Now(), ask)
	require.Equal(t, key, nextOf(t, p))
	_, ok := p.Answer(t.Context(), key, time.Minute, time.Now(), ask)
	require.True(t, ok)

	p.Answer(t.Context(), key, 0, time.Now(), ask) // the second ask, which hangs
	require.Eventually(t, func() bool { return asked.Load() == 2 }, 10*time.Second, 10*time.Millisecond)
	p.Outdate(key, time.Now())
	_, ok = p.Answer(t.Context(), key, time.Minute, time.Now(), ask)
	assert.False(t, ok, "an answer asked before the change")
	close(release)
	assert.Equal(t, key, nextOf(t, p), "the answer asked after the change, though the same, is news")
	assert.Equal(t, int32(3), asked.Load(), "the ask under way at the change is asked again")
	a, ok := p.Answer(t.Context(), key, time.Minute, time.Now(), ask)
	require.True(t, ok)
	assert.Equal(t, 1, a.Value)
}

// same decides what is news: a value that differs is an event even when
// both answered.
func TestSameDecidesNews(t *testing.T) {
	p := NewPool(1, func(before, after Answer[int]) bool { return before.Value == after.Value })
	key := types.NamespacedName{Name: "members"}
	value := func(v int) func(context.Context) (int, error) {
		return func(context.Context) (int, error) { return v, nil }
	}
	p.Answer(t.Context(), key, 0, time.Now(), value(1))
	require.Equal(t, key, nextOf(t, p))
	p.Answer(t.Context(), key, 0, time.Now(), value(2))
	require.Equal(t, key, nextOf(t, p))
	a, _ := p.Answer(t.Context(), key, time.Minute, time.Now(), nil)
	assert.Equal(t, 2, a.Value)
}

// An ask runs with the values of the context it was given with (the span
// of the pass that asked, so a trace shows the ask below it) but outlives
// that context: a pass ends long before its ask does.
func TestAsksKeepTheAskersValuesNotItsEnd(t *testing.T) {
	type askerKey struct{}
	p := NewPool(1, Answered[string])
	key := types.NamespacedName{Name: "traced"}
	ctx, cancel := context.WithCancel(context.WithValue(t.Context(), askerKey{}, "the pass"))
	release := make(chan struct{})
	p.Answer(ctx, key, time.Minute, time.Now(), func(ctx context.Context) (string, error) {
		<-release
		asker, _ := ctx.Value(askerKey{}).(string)
		return asker, ctx.Err()
	})
	cancel() // the pass ends while its ask waits
	close(release)
	require.Equal(t, key, nextOf(t, p))
	a, ok := p.Answer(t.Context(), key, time.Minute, time.Now(), nil)
	require.True(t, ok)
	require.NoError(t, a.Err, "the ask was not cancelled with the pass")
	assert.Equal(t, "the pass", a.Value)
}

func nextOf[T any](t *testing.T, p *Pool[T]) types.NamespacedName {
	t.Helper()
	select {
	case e := <-p.Events():
		return e.Object
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return types.NamespacedName{}
	}
}
