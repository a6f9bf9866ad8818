// Package cluster runs a local Kubernetes management cluster on this machine
// without Docker: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler as processes, one node made of a real kubelet with
// containerd and runc, a bridge network for pods, kube-proxy, kube-router's
// network policy controller (which enforces NetworkPolicies) and CoreDNS as
// pods, a LoadBalancer address allocator, a volume provisioner (each
// volume a sparse file, formatted XFS and loop-mounted on the host path the
// PersistentVolume names, of the size its claim asks for and grown online
// when the claim asks for more) and, as an infrastructure provider would,
// the provisioning of each LocalCluster (LocalClusterKind).
//
// Beside it, StartWorker runs worker nodes that join hosted (workload)
// clusters with `kubeadm join` and a bootstrap token, each a kubelet and a
// containerd of its own in its own network namespace (linked to the host by
// a veth pair, see WorkerCIDR) and mount namespace (its own /etc/kubernetes,
// /var/lib/kubelet, /etc/cni/net.d, /run/containerd, ...).
//
// Everything a cluster starts, its workers included, is recorded in its
// directory, so that Teardown removes it by process id, mount, network
// namespace and interface name even after the process that started it died.
package cluster
