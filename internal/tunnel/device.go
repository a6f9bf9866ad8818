package tunnel

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Loopback is the device that holds the address on a kernel without the
// dummy driver.
const Loopback = "lo"

// EnsureDevice makes sure the network device name exists, is up and holds
// addr as a prefix of that one address (/32 or /128), and returns the
// device that holds it. A missing device is created as a dummy device:
// unlike lo, Cilium's host routing treats an address there as the node's own
// and does not pick it as a source address. A kernel without the dummy
// driver (CONFIG_DUMMY unset) gets the address on lo instead, which serves
// kube-proxy's DNAT as well. An existing device is used as it is, whatever
// its kind, so that a restart changes nothing. Nothing removes the device:
// pods keep reaching the address across restarts of the proxy.
func EnsureDevice(name string, addr netip.Addr) (string, error) {
	link, err := netlink.LinkByName(name)
	if _, missing := errors.AsType[netlink.LinkNotFoundError](err); missing {
		err = netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}})
		if errors.Is(err, unix.EOPNOTSUPP) {
			name = Loopback
		} else if err != nil {
			return "", fmt.Errorf("create dummy device %s: %w", name, err)
		}
		link, err = netlink.LinkByName(name)
	}
	if err != nil {
		return "", fmt.Errorf("device %s: %w", name, err)
	}
	bits := addr.BitLen()
	ipNet := &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(bits, bits)}
	// The kernel refuses an address the device holds already, changing
	// nothing.
	if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: ipNet}); err != nil && !errors.Is(err, unix.EEXIST) {
		return "", fmt.Errorf("add %s to device %s: %w", ipNet, name, err)
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(link); err != nil {
			return "", fmt.Errorf("set device %s up: %w", name, err)
		}
	}
	return name, nil
}
