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
// mounts one.
//
// Rendering is pure: a component renders from a render.Input alone, which
// the controller builds once per pass from what it observed, and the same
// Input always gives the same bytes (testdata/<case>/<component>.yaml).
// Readiness (package readiness) is the only part that reads a cluster.
package components
