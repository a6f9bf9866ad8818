// Package hooks holds the Runtime SDK lifecycle hooks of cmd/extension:
// BeforeClusterUpgrade and BeforeControlPlaneUpgrade hold an upgrade until the
// hosted etcd and the control plane are healthy, and the After* and
// BeforeClusterDelete hooks do what a careful operator would.
package hooks
