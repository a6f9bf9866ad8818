// Command probe checks, from inside a pod, what a workload cluster gives its
// pods: it resolves the API server's Service name through cluster DNS and
// GETs /version from the API server through the kubernetes Service with the
// pod's service account token and CA, printing both results, every few
// seconds until both succeed; then it stays up (for kubectl logs and exec)
// until it is stopped. The end-to-end tests build the image
// hostedcp.test/probe:dev from it.
//
// Flags: --version prints "probe <version>" and exits (what the tests run
// through kubectl exec); --name (default
// kubernetes.default.svc.cluster.local) and --url (default
// https://kubernetes.default.svc/version) change what it checks. With
// --dial host:port (repeatable) it only opens a TCP connection to each
// address once, prints "dial <addr>: ok" or the error, and exits: the
// end-to-end tests run it in pods of the management cluster to see which
// addresses network policies let them reach.
package main
