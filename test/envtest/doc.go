// Package envtest runs the provider against a real kube-apiserver and etcd
// (built from source by `make kube-binaries`) with the CRDs of this provider,
// Cluster API, cert-manager and Gateway API installed from the module cache.
// Its helpers start that environment, the provider's own binaries, and
// cert-manager's real controllers in-process (StartCertManager) so that
// Certificates from SelfSigned and CA issuers are really issued; its tests
// check what a user would: what the API accepts, stores and rejects, and what
// cert-manager issues.
package envtest
