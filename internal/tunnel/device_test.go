package tunnel

import (
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

var nodeLocal = netip.MustParseAddr("240.0.0.1")

// EnsureDevice puts the node-local address on the device and brings it up,
// so that a listener can bind it; a second call changes nothing, which the
// kernel's link and address notifications show. Each case runs in a fresh
// network namespace.
func TestEnsureDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes a network namespace and devices in it")
	}
	for name, device := range map[string]string{"missing, created as a dummy": "hcp-kas0", "existing lo, used as it is": "lo"} {
		t.Run(name, func(t *testing.T) {
			inNewNetns(t, func(ns netns.NsHandle) {
				events := subscribe(t, ns)
				got, err := EnsureDevice(device, nodeLocal)
				require.NoError(t, err)
				assert.NotEmpty(t, quiet(events), "the first call changes the device")
				if got != device {
					// Only for a kernel without the driver, like this one may be.
					require.Equal(t, Loopback, got, "the fallback device")
					require.ErrorIs(t, netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "probe0"}}), unix.EOPNOTSUPP,
						"lo only when the kernel cannot make a dummy device")
					t.Logf("this kernel has no dummy network device driver (CONFIG_DUMMY): the address went on lo")
					device = got
				}

				link, err := netlink.LinkByName(device)
				require.NoError(t, err)
				if device != "lo" {
					assert.Equal(t, "dummy", link.Type())
				}
				assert.NotZero(t, link.Attrs().Flags&net.FlagUp, "device is up")
				addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
				require.NoError(t, err)
				assert.True(t, slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return a.IPNet.String() == "240.0.0.1/32" }),
					"addresses: %v", addrs)
				ln, err := net.Listen("tcp", net.JoinHostPort(nodeLocal.String(), "6443"))
				require.NoError(t, err, "listen on the node-local address")
				require.NoError(t, ln.Close())

				second, err := EnsureDevice(device, nodeLocal)
				require.NoError(t, err)
				assert.Equal(t, device, second)
				assert.Empty(t, quiet(events), "the second call changes nothing")
				again, err := netlink.LinkByName(device)
				require.NoError(t, err)
				assert.Equal(t, link.Attrs().Index, again.Attrs().Index)
				t.Logf("%s (%s): %v, flags %v", device, link.Type(), addrs, again.Attrs().Flags)
			})
		})
	}
}

// inNewNetns runs fn on a thread of its own in a fresh network namespace,
// which goes away with the thread's return to the old one.
func inNewNetns(t *testing.T, fn func(netns.NsHandle)) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	require.NoError(t, err)
	ns, err := netns.New()
	require.NoError(t, err)
	defer func() {
		_ = ns.Close()
		// A thread left in the test namespace must not serve other
		// goroutines: it stays locked and ends with this one.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		_ = orig.Close()
	}()
	fn(ns)
}

// subscribe reports the link and address changes in ns.
func subscribe(t *testing.T, ns netns.NsHandle) <-chan string {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	links, addrs := make(chan netlink.LinkUpdate, 64), make(chan netlink.AddrUpdate, 64)
	require.NoError(t, netlink.LinkSubscribeAt(ns, links, done))
	require.NoError(t, netlink.AddrSubscribeAt(ns, addrs, done))
	events := make(chan string, 128)
	go func() {
		for {
			select {
			case u := <-links:
				events <- "link " + u.Attrs().Name
			case u := <-addrs:
				events <- "address " + u.LinkAddress.String()
			case <-done:
				return
			}
		}
	}()
	return events
}

// quiet returns the changes reported until none came for a while.
func quiet(events <-chan string) []string {
	var got []string
	for {
		select {
		case e := <-events:
			got = append(got, e)
		case <-time.After(300 * time.Millisecond):
			return got
		}
	}
}
