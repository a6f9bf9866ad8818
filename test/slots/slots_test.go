package slots

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Tests released together start longest first, as many at once as there
// are slots, and the next starts only once one has ended.
func TestLongestFirst(t *testing.T) {
	s := New("one of 2 slots", 2, []string{"TestLongest", "TestLonger"})
	var (
		mu      sync.Mutex
		started []string
		running int
		most    int
	)
	var wg sync.WaitGroup
	for _, name := range []string{"TestShort", "TestLonger", "TestOther", "TestLongest"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tt := &fakeT{name: name}
			s.Acquire(tt)
			mu.Lock()
			started = append(started, name)
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			tt.end()
		}()
		time.Sleep(10 * time.Millisecond) // released one after another, within settle
	}
	wg.Wait()
	assert.ElementsMatch(t, []string{"TestLongest", "TestLonger"}, started[:2], "the two ranked first start first")
	assert.ElementsMatch(t, []string{"TestShort", "TestOther"}, started[2:])
	assert.Equal(t, 2, most, "never more at once than slots")
}

// fakeT is the part of testing.TB Acquire uses, for tests of its own
// released as goroutines.
type fakeT struct {
	testing.TB
	name     string
	cleanups []func()
	logs     []string
}

func (f *fakeT) Name() string                 { return f.name }
func (f *fakeT) Cleanup(fn func())            { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Logf(format string, a ...any) { f.logs = append(f.logs, fmt.Sprintf(format, a...)) }

func (f *fakeT) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// Tests that use a group run beside each other; the test that changes it
// runs beside none of them, and while it waits for them a test ranked after
// it takes the free slot.
func TestClaims(t *testing.T) {
	s := New("one of 3 slots", 3, []string{"TestUses", "TestChanges", "TestAlsoUses", "TestOther"})
	var (
		mu      sync.Mutex
		events  []string
		release = map[string]chan struct{}{}
	)
	claims := map[string][]Claim{
		"TestUses": {Uses("shared")}, "TestChanges": {Changes("shared")}, "TestAlsoUses": {Uses("shared")},
	}
	var wg sync.WaitGroup
	for _, name := range []string{"TestOther", "TestAlsoUses", "TestChanges", "TestUses"} {
		release[name] = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			tt := &fakeT{name: name}
			s.Acquire(tt, claims[name]...)
			mu.Lock()
			events = append(events, "start "+name)
			mu.Unlock()
			<-release[name]
			mu.Lock()
			events = append(events, "end "+name)
			mu.Unlock()
			tt.end()
		}()
	}
	seen := func(n int) []string {
		t.Helper()
		assert.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(events) >= n }, 5*time.Second, 10*time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(events)
	}
	assert.ElementsMatch(t, []string{"start TestUses", "start TestAlsoUses", "start TestOther"}, seen(3),
		"the two that use the group start beside each other; the one that changes it waits, and the next takes its slot")
	close(release["TestOther"])
	time.Sleep(settle)
	assert.Equal(t, []string{"end TestOther"}, seen(4)[3:], "the one that changes the group waits while one uses it, a slot free")
	close(release["TestUses"])
	time.Sleep(settle)
	assert.Equal(t, []string{"end TestUses"}, seen(5)[4:], "and while the other does")
	close(release["TestAlsoUses"])
	assert.Equal(t, []string{"end TestAlsoUses", "start TestChanges"}, seen(7)[5:], "it starts once neither runs")
	close(release["TestChanges"])
	wg.Wait()
}

// A test that asks for a slot after the first ones have all ended (go test
// -count=2 runs the parallel tests again after the first round) gets one:
// no release is left to hand it over.
func TestLateTestGetsASlot(t *testing.T) {
	s := New("one of 2 slots", 2, nil)
	first := &fakeT{name: "TestFirst"}
	s.Acquire(first)
	first.end()
	time.Sleep(settle + 100*time.Millisecond)
	late := make(chan struct{})
	go func() {
		s.Acquire(&fakeT{name: "TestFirst"})
		close(late)
	}()
	select {
	case <-late:
	case <-time.After(5 * time.Second):
		t.Fatal("the late test never got a slot")
	}
}
