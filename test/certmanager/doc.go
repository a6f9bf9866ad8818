// Package certmanager runs cert-manager's own code, at the release this
// module pins, inside a Go process: the controllers that issue Certificates
// from SelfSigned and CA Issuers and ClusterIssuers (Controllers), and the
// cainjector that copies CA bundles into webhook configurations, API
// services and CRD conversion webhooks from their cert-manager.io/inject-ca-from
// annotations (NewCAInjector).
//
// The envtest suite runs the controllers in-process; the local management
// cluster runs both in a pod, through tools/localcluster/cmd/cert-manager.
package certmanager
