package backup

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

// slotsUnderTest records whom the slots wake, in order, and runs on a
// clock the test moves.
type slotsUnderTest struct {
	*slots
	woken []types.NamespacedName
	clock time.Time
}

func newSlotsUnderTest(n int) *slotsUnderTest {
	u := &slotsUnderTest{clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	u.slots = newSlots(n, func(cp types.NamespacedName) { u.woken = append(u.woken, cp) })
	u.now = func() time.Time { return u.clock }
	return u
}

func cp(ns string, i int) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("cp-%d", i)}
}

// serve lets the control planes woken take their slots, each holding it
// until the test releases it, and returns whom it served.
func (u *slotsUnderTest) serve(t *testing.T) ([]types.NamespacedName, []func()) {
	t.Helper()
	woken := u.woken
	u.woken = nil
	var releases []func()
	for _, w := range woken {
		release, ok := u.take(w)
		require.True(t, ok, "%s was woken for its slot", w)
		releases = append(releases, release)
	}
	return woken, releases
}

func TestSlotsBoundSnapshotsAtOnce(t *testing.T) {
	u := newSlotsUnderTest(2)
	r1, ok := u.take(cp("a", 1))
	require.True(t, ok)
	_, ok = u.take(cp("b", 1))
	require.True(t, ok)
	_, ok = u.take(cp("c", 1))
	require.False(t, ok, "two slots, both taken")
	_, ok = u.take(cp("c", 1))
	require.False(t, ok, "asking again does not help")
	r1()
	r1() // a second release gives back nothing more
	require.Equal(t, []types.NamespacedName{cp("c", 1)}, u.woken)
	_, ok = u.take(cp("d", 1))
	require.False(t, ok, "the freed slot is c's, not a newcomer's")
	served, _ := u.serve(t)
	require.Equal(t, []types.NamespacedName{cp("c", 1)}, served)
	require.Empty(t, u.woken, "no slot was left for d")
}

// A tenant with fifty control planes due at once, beside a tenant with one:
// the one gets a slot after at most one more of the fifty, and slots go
// round by namespace while both wait.
func TestSlotsServeNamespacesInTurn(t *testing.T) {
	u := newSlotsUnderTest(2)
	var running []func()
	for i := range 50 {
		if release, ok := u.take(cp("greedy", i)); ok {
			running = append(running, release)
		}
	}
	require.Len(t, running, 2)
	_, ok := u.take(cp("normal", 0))
	require.False(t, ok)

	greedyFirst := 0
	for len(u.woken) == 0 || u.woken[0].Namespace != "normal" {
		require.Less(t, greedyFirst, 2, "normal waits behind at most one of greedy's: %v", u.woken)
		running[0]()
		running = running[1:]
		if len(u.woken) > 0 && u.woken[0].Namespace == "greedy" {
			greedyFirst++
			_, releases := u.serve(t)
			running = append(running, releases...)
		}
	}
	require.LessOrEqual(t, greedyFirst, 1)

	// Three tenants waiting: each takes its turn.
	u = newSlotsUnderTest(1)
	release, ok := u.take(cp("a", 0))
	require.True(t, ok)
	for _, c := range []types.NamespacedName{cp("a", 1), cp("a", 2), cp("a", 3), cp("b", 1), cp("b", 2), cp("c", 1)} {
		_, ok := u.take(c)
		require.False(t, ok)
	}
	var order []string
	for range 6 {
		release()
		served, releases := u.serve(t)
		require.Len(t, served, 1)
		order = append(order, served[0].String())
		release = releases[0]
	}
	assert.Equal(t, []string{"b/cp-1", "c/cp-1", "a/cp-1", "b/cp-2", "a/cp-2", "a/cp-3"}, order,
		"a was served last, so the namespaces that start waiting go before it; then in turn")
}

// A slot kept for a control plane that never comes back for it (it no
// longer wants a snapshot) goes to the next after grantTimeout.
func TestSlotsKeptForNoOneAreFreed(t *testing.T) {
	u := newSlotsUnderTest(1)
	release, ok := u.take(cp("a", 0))
	require.True(t, ok)
	_, ok = u.take(cp("b", 0))
	require.False(t, ok)
	_, ok = u.take(cp("c", 0))
	require.False(t, ok)
	release()
	require.Equal(t, []types.NamespacedName{cp("b", 0)}, u.woken, "kept for b")
	u.woken = nil
	_, ok = u.take(cp("c", 0))
	require.False(t, ok, "still b's")
	u.clock = u.clock.Add(grantTimeout + time.Second)
	_, ok = u.take(cp("c", 0))
	require.True(t, ok, "then c's")
	require.Empty(t, u.woken)
}
