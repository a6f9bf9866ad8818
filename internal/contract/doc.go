// Package contract is what the controller, the extension, the applier and
// the renderer must agree on without depending on each other: the labels
// that mark and select our objects, the names and ports of the objects the
// extension reads, the gateway listener rule and the hostname served
// through it, the etcd quota the upgrade gates judge against, the flags
// the renderer owns, which admission refuses in a user's args, and the
// digest stored in annotations of what the controller applied and of what
// a pod's Secrets hold.
//
// It is a leaf: it imports nothing of ours but the API types, so that the
// extension reads a control plane's objects without the renderer, and the
// renderer labels them without the applier.
package contract
