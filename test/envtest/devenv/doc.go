// Command devenv is `make dev`: a local API server (kube-apiserver and etcd
// built from source) with the provider's, Cluster API's, cert-manager's and
// Gateway API's CRDs, cert-manager's controllers, the real controller
// serving its admission webhooks and reconciling, a Gateway, and the samples
// of config/samples applied. Nothing runs pods here, so the sample control
// plane stops at etcd; its conditions show how far it got. It runs until
// interrupted.
package main
