// Command cert-manager runs cert-manager's controllers (SelfSigned and CA
// issuing) and its cainjector in one process, in a pod of the local
// management cluster or against the cluster of --kubeconfig. The local
// cluster's image hostedcp.test/cert-manager is built from it, since
// cert-manager's own images cannot be pulled there.
//
// Flags: --kubeconfig (empty: the pod's service account),
// --leader-elect with --leader-election-namespace, --health-addr (GET
// /healthz), --log-format json or text. ClusterIssuers read their Secrets
// from the cert-manager namespace.
package main
