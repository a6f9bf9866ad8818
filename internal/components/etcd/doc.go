// Package etcd is everything about a hosted control plane's etcd, in one
// room: the Component that renders its members (a StatefulSet with
// persistent volumes and the backend quota derived from their size), its
// headless and client Services, disruption budget and network policy; the
// certificates it serves and connects with, and their names; the image tags
// kubeadm pairs with each Kubernetes minor; the preflight check that holds a
// change of membership; the rule by which it is ready; what the status
// reports of it (Members, VolumeSize); and the health check the extension's
// upgrade gates run.
//
// The health check looks at etcd from the management cluster the way an
// operator would before touching it: every member answers, a leader exists,
// no alarm is raised and no database is close to its quota. It finds the
// members through the EndpointSlices of the etcd client Service, dials each
// one by address with the health-check client certificate the controller
// keeps in a Secret, and verifies the servers' certificates against the
// Service's DNS name. Clients are cached per cluster and certificate, so
// repeated checks reuse their connections, and every call is bounded by a
// timeout.
//
// The same clients stream snapshots (Checker.Snapshot) from a member that
// answers, a follower when there is one; VerifyingReader checks such a
// stream's trailing sha256 as it passes, the way etcdutl checks a snapshot
// before restoring it.
//
// Of the renderer it imports only the building blocks (render) and the
// readiness rules, so that the extension, which only checks health, carries
// no other component.
package etcd
