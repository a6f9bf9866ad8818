// Package components renders the objects of a hosted control plane (PKI,
// etcd, kube-apiserver, controller-manager, scheduler, exposure, kubeconfigs)
// and those it keeps inside the workload cluster (join objects, CoreDNS,
// kube-proxy, konnectivity agents) as pure, deterministic functions of the
// control plane, its Cluster and the controller's settings, so that the same
// inputs always give the same bytes.
package components
