// Command tunnel carries the pods' connections to kubernetes.default of a
// hosted control plane through a shared SNI Gateway (see internal/tunnel).
// "tunnel server" runs beside each kube-apiserver in the management
// cluster, "tunnel node" in a hostNetwork DaemonSet on every worker; run
// either with -h for its flags. "tunnel keys", the same image's other
// sidecar beside kube-apiserver, serves it the management cluster's
// service account issuer keys (spec.managementServiceAccounts), and
// "tunnel audit" posts its audit events to every webhook target
// (spec.deployment.apiServer.audit.webhook). All log
// JSON to stderr; server and node drain open connections on SIGTERM.
package main
