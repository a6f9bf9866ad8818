package cluster

import (
	"context"
	"net"
	"strings"
	"time"
)

// Resolver asks the DNS server that machines outside the cluster ask
// (DNSAddress) and answers for GatewayDomain only.
var Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, net.JoinHostPort(DNSAddress, "53"))
}}

// DialContext dials addr as a client on a host whose network published
// GatewayDomain would: names under it resolve through Resolver, others as
// usual. Tests set it as a rest.Config's Dial rather than change the host's
// /etc/resolv.conf.
func DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if host, _, err := net.SplitHostPort(addr); err == nil && InGatewayDomain(host) {
		d.Resolver = Resolver
	}
	return d.DialContext(ctx, network, addr)
}

// InGatewayDomain tells whether host is a name under GatewayDomain.
func InGatewayDomain(host string) bool {
	return strings.HasSuffix(strings.TrimSuffix(host, "."), "."+GatewayDomain)
}
