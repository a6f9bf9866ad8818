// Package controller reconciles HostedControlPlanes. A pass first observes
// (observe.go): it builds the pass's render.Input once, from the control
// plane, its Cluster and what it reads of the clusters (the Gateway's
// listener, the exposure Service's address, what the Secrets the pods mount
// hold, the cluster CA). What it cannot observe yet holds the phase that
// needs it, with the reason that says why.
//
// It then keeps the components of internal/components, side by side through
// one loop (phases.go): on the management side in order, components that
// share a condition forming one phase, and a phase that is not done stops
// the pass, so an upgrade moves etcd, then the API servers, then the
// controllers, never two at once (only on the first start do the API
// servers start beside etcd, and the controllers once one API server is
// ready, see startsTogether); on the workload side, once the API server
// answers and through Cluster API's ClusterCache, each phase stands alone
// and never makes the control plane unavailable. There too, once every API
// server encrypts with the key observation found or generated
// (encryption.go), the Secrets stored before it are rewritten a page a
// pass (EncryptionReady). The status, conditions
// included, is computed in one place (status.go) from what the pass
// recorded, and an unchanged control plane costs no API writes.
package controller
