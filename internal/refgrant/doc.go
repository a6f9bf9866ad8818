// Package refgrant decides whether a HostedControlPlane may use an object
// in another namespace: a backup Secret the platform team keeps in its own
// namespace, or the snapshots of a Cluster another team owns.
//
// Tenants have rights in their own namespaces only, and the controller has
// rights everywhere, so a reference a tenant writes must not make the
// controller read what the tenant could not. The owner of the referenced
// object says who may use it, with Gateway API's ReferenceGrant
// (gateway.networking.k8s.io/v1beta1), the ecosystem's convention for
// exactly this: a grant in the referenced object's namespace that lists
// HostedControlPlanes (group controlplane.cluster.x-k8s.io) of the
// requester's namespace in from, and the object's kind (and, optionally,
// name) in to.
//
// A grant is checked every time the reference is used, from the API server
// rather than a cache (a deleted grant takes effect at the next use, and
// the controller caches only what it labels), and before anything of the
// referenced object is read, so that the answer for an object nobody
// granted is the same whether it exists or not. Where the ReferenceGrant
// CRD is not installed, every reference to another namespace is refused
// with an error that says so.
package refgrant
