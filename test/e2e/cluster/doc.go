// Package cluster runs a local Kubernetes management cluster on this machine
// without Docker: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler as processes, one node made of a real kubelet with
// containerd and runc, a bridge network for pods, kube-proxy and CoreDNS as
// pods, a LoadBalancer address allocator and a host-path volume provisioner.
//
// Everything a cluster starts is recorded in its directory, so that Teardown
// removes it by process id, mount and interface name even after the process
// that started it died.
package cluster
