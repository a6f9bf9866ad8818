// Package components is a hosted control plane, one room per component: each
// is a small type (see Component) that owns its rendered objects, the
// certificates it uses, the rule by which it is ready and the condition that
// says so. Management lists the components in the management cluster in the
// order a pass keeps them (exposure, the PKI, the kubeconfigs, etcd, the API
// server with the konnectivity server and the gateway tunnel's server beside
// it, the controller manager, the scheduler); Workload lists those inside the
// workload cluster (join objects, the kubernetes Service, CoreDNS,
// kube-proxy, konnectivity agents). The reconciler and the golden test walk
// the same two lists.
//
// A room is a file here (exposure.go, pki.go, kubeconfig.go, apiserver.go
// with konnectivity.go and tunnel.go, controllers.go, join.go,
// kubernetesservice.go, coredns.go, kubeproxy.go, konnectivityagent.go),
// except etcd, a package of its own (internal/components/etcd) because the
// extension checks its health without the rest of the renderer. Certificates
// stay with the component that uses them; the PKI room owns the roots and
// issues every certificate with them, so that all exist before any pod
// mounts one. What each process reads of them again when cert-manager renews
// them, and so what a renewal rolls, is in reload.go.
//
// Each management component renders its own network policies
// (render.Input.NetworkPolicies), ingress and egress, so that a hosted pod
// answers and reaches only what its component needs: etcd answers its API
// servers, its members and the controller's namespace and reaches its
// members and DNS, and, while its pods restore a snapshot as they start,
// the S3 store (any address but link-local ones and the management API
// server's: the store's address is in a Secret and a policy takes no
// name); the API servers answer everyone on their ports and reach their
// etcd and DNS, everything else they send going out through konnectivity,
// whose agents dial in; the controller manager and the scheduler answer no
// one and reach their API servers and DNS. DNS is port 53 to any address,
// wherever the platform runs its resolver. Where Cilium's CRDs are served
// each also gets a CiliumNetworkPolicy that denies, by Cilium's identities,
// the management API server and the cloud metadata addresses, which a
// NetworkPolicy can only approximate by address. Why each rule exists is
// said where it is rendered (etcd/statefulset.go, apiserver.go,
// controllers.go, render/networkpolicy.go).
//
// Rendering is pure: a component renders from a render.Input alone, which
// the controller builds once per pass from what it observed, and the same
// Input always gives the same bytes (testdata/<case>/<component>.yaml).
// Readiness (package readiness) is the only part that reads a cluster.
package components
