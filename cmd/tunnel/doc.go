// Command tunnel carries the pods' connections to kubernetes.default of a
// hosted control plane through a shared SNI Gateway (see internal/tunnel).
// "tunnel server" runs beside each kube-apiserver in the management
// cluster, "tunnel node" in a hostNetwork DaemonSet on every worker; run
// either with -h for its flags. Both log JSON to stderr and drain open
// connections on SIGTERM.
package main
