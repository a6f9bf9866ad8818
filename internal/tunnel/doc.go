// Package tunnel makes kubernetes.default work in a workload cluster whose
// API server is reachable only through a shared Gateway that routes TLS
// passthrough by SNI.
//
// # The problem
//
// Pods reach their API server through the default/kubernetes Service: a
// ClusterIP, so their TLS carries no SNI, and the Gateway cannot tell which
// tenant they want. The pod's ClientHello cannot be rewritten either: it is
// part of the handshake it authenticates.
//
// # The design
//
// A node-local address and a TLS-in-TLS tunnel whose outer SNI names the
// tenant:
//
//   - Every worker holds the same spare address (240.0.0.1 by default, from
//     the reserved 240.0.0.0/4) on a dummy network device (EnsureDevice),
//     and the hosted API servers advertise it: it is the one endpoint of
//     default/kubernetes, and an IP SAN of their serving certificate.
//   - Node, in a hostNetwork DaemonSet, listens there. For each connection
//     it opens an outer TLS connection to kas-tunnel.<cluster>.<namespace>.<domain>:443,
//     which the Gateway routes by that SNI to the tenant's Server, and
//     splices the pod's bytes into it unopened.
//   - Server, a sidecar beside each kube-apiserver, terminates the outer TLS
//     with a certificate of the cluster CA and splices what is inside to the
//     API server over plain TCP on localhost.
//
// The packet path: pod → ClusterIP:443 → kube-proxy's DNAT (or Cilium's
// socket load balancer) → 240.0.0.1:6443, a local address, so the node's
// own Node gets it → outer TLS to the Gateway's address, SNI
// kas-tunnel.<cluster>.<namespace>.<domain> → TLSRoute → Server :6444 in an
// API server pod → 127.0.0.1:6443, where the API server finishes the
// pod's own TLS handshake.
//
// # Security
//
//   - The outer TLS is verified against the cluster CA that kubeadm wrote on
//     the node, for the tenant's kas-tunnel name: a node hands its pods'
//     traffic to its tenant's Server and to nothing else, whatever the
//     network or the Gateway does.
//   - The inner TLS is the pod's own, end to end with the API server: tokens,
//     client certificates, ALPN and HTTP/2, watches and the upgrades of exec,
//     attach and port-forward pass unchanged, and neither end of the tunnel
//     can read or alter them.
//   - Server exposes nothing beyond what the API server's public hostname
//     exposes already: the same API server port, which authenticates every
//     request itself.
//   - No secret lands on nodes: Node needs only the public CA certificate.
//
// # Costs
//
//   - Two TLS layers on the leg from node to API server.
//   - The API server sees Server as every tunnelled client's address (audit
//     logs name 127.0.0.1).
//   - A node whose Node is down loses API access for its pods; readiness
//     (/readyz performs an outer handshake) and priority mitigate it.
//   - A connection the Gateway drops before the tunnel is open (it still
//     routes to an API server pod that has stopped listening, or not yet to
//     its replacement) is tried again for up to 10 seconds: nothing of the
//     pod's has left the node, so the pod waits instead of seeing its
//     connection reset (Node.open).
//   - Connections have no idle timeout, as watches stay open for hours: TCP
//     keepalive finds dead peers, and the Gateway's own idle timeout must
//     allow long watches.
//
// # Beside it
//
// The same binary serves two more needs of the same places: with an
// endpoint that is a name (a load balancer of the tenant's own that gives
// a hostname), Node forwards to it directly, without the outer TLS, since
// nothing there routes by SNI (NewNode's direct); Keys, a sidecar
// beside kube-apiserver, serves it the management cluster's service
// account issuer keys on loopback; and AuditForwarder, another sidecar
// there, takes its audit events on loopback and posts them to every
// webhook target, as the API server posts to one only.
package tunnel
