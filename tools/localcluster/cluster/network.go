package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
)

// setUpNetwork makes the bridge pods attach to, with the node's address and
// ExternalAddress on it, routes LoadBalancer addresses to it (kube-proxy
// answers for them), and
// turns on forwarding and the bridge's netfilter hook kube-proxy relies on.
func (c *Cluster) setUpNetwork(context.Context) error {
	for path, value := range map[string]string{
		"/proc/sys/net/ipv4/ip_forward":                 "1",
		"/proc/sys/net/bridge/bridge-nf-call-iptables":  "1",
		"/proc/sys/net/bridge/bridge-nf-call-ip6tables": "1",
	} {
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("%w (is the br_netfilter module loaded?)", err)
		}
	}
	_, podNet, err := net.ParseCIDR(PodCIDR)
	if err != nil {
		return err
	}
	ones, _ := podNet.Mask.Size()
	for _, args := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", fmt.Sprintf("%s/%d", NodeIP, ones), "dev", bridgeName},
		{"addr", "add", ExternalAddress + "/32", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
		{"route", "add", LoadBalancerCIDR, "dev", bridgeName},
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return os.WriteFile(c.layout.path("cni", "10-hcp.conflist"), []byte(cniConfig()), 0o600)
}

func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// cniConfig attaches pods to the bridge with addresses from PodCIDR. The
// bridge plugin masquerades nothing: all traffic stays on this machine.
func cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "hcp",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, bridgeName, PodCIDR, NodeIP)
}
