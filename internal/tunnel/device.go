package tunnel

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// EnsureDevice makes sure the network device name exists, is up and holds
// addr as a prefix of that one address (/32 or /128). A missing device is
// created as a dummy device: unlike lo, Cilium's host routing treats an
// address there as the node's own and does not pick it as a source address.
// An existing device is used as it is, whatever its kind, so that a restart
// changes nothing and a kernel without the dummy driver can use lo.
// Nothing removes the device: pods keep reaching the address across
// restarts of the proxy.
func EnsureDevice(name string, addr netip.Addr) error {
	link, err := netlink.LinkByName(name)
	if _, missing := errors.AsType[netlink.LinkNotFoundError](err); missing {
		if err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
			return fmt.Errorf("create dummy device %s: %w", name, err)
		}
		link, err = netlink.LinkByName(name)
	}
	if err != nil {
		return fmt.Errorf("device %s: %w", name, err)
	}
	bits := addr.BitLen()
	ipNet := &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(bits, bits)}
	// The kernel refuses an address the device holds already, changing
	// nothing.
	if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: ipNet}); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add %s to device %s: %w", ipNet, name, err)
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(link); err != nil {
			return fmt.Errorf("set device %s up: %w", name, err)
		}
	}
	return nil
}
