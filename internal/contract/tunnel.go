package contract

// In gateway mode the workload cluster's kubernetes Service reaches its API
// server through a tunnel: a proxy on every node listens on a node-local
// address, which is the Service's only endpoint, and carries each connection
// inside an outer TLS connection to the Gateway; the outer SNI names the
// tenant's tunnel hostname, which routes to a sidecar beside each API server
// that unwraps it. The renderer and cmd/tunnel share these.
const (
	// NodeLocalAddress is the address every node's proxy listens on, on a
	// dummy device of its own. It is in 240.0.0.0/4, which no network routes
	// and the EndpointSlice API accepts (unlike loopback or link-local), so
	// kube-proxy's DNAT from the Service address delivers to the node itself.
	NodeLocalAddress = "240.0.0.1"
	// NodeTunnelPort is where the node proxy listens, the port of the
	// kubernetes Service's endpoint.
	NodeTunnelPort = 6443
	// NodeTunnelHealthPort serves the node proxy's /healthz and /readyz on
	// NodeLocalAddress.
	NodeTunnelHealthPort = 6480
	// NodeTunnelDevice is the dummy network device that holds
	// NodeLocalAddress.
	NodeTunnelDevice = "hcp-kas0"
	// TunnelPort is where the sidecar beside each API server terminates the
	// outer TLS, named "tunnel" on the API server's pods and Service.
	TunnelPort     = 6444
	TunnelPortName = "tunnel"
	// TunnelHealthPort serves the sidecar's /healthz and /readyz.
	TunnelHealthPort = 6445
)

// DefaultTunnelImage is the image of cmd/tunnel of this release, which the
// controller runs unless TUNNEL_IMAGE names another.
const DefaultTunnelImage = "ghcr.io/hostedcp/cluster-api-provider-hosted-tunnel:dev"

// TunnelHost is the outer SNI of the kubernetes Service's tunnel of cluster in
// namespace, under the gateway listener's wildcard domain.
func TunnelHost(cluster, namespace, domain string) string {
	return "kas-tunnel." + GatewayHost(cluster, namespace, domain)
}
