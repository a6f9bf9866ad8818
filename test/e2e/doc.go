// Package e2e holds the end-to-end tests: a local management cluster with a
// real kubelet (package cluster) runs cert-manager, Cluster API and this
// provider as users install them, and the tests drive hosted control planes
// in it as users do. Run them with make test-e2e; they need root.
package e2e
