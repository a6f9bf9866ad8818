// Package images builds every binary and container image the local
// management cluster and the end-to-end tests run, from source fetched
// through the Go module proxy (and, for kube-proxy and kube-router, the
// host's Debian iptables, conntrack and ipset), since nothing can be pulled
// on the machines they run on. The conformance suite's test images also
// carry Debian's nginx package, the host's dig, curl, nc and getent, and
// BusyBox compiled from the source Debian's archive holds (busybox.go).
//
// Binaries are cached under bin/ in the repository root, keyed by version
// (bin/kube/v1.36.3/kube-apiserver, bin/coredns/v1.14.2/coredns, ...), and
// are rebuilt only when missing or not statically linked. Each image is an
// OCI tarball under bin/images/, written with go-containerregistry from an
// empty image, one layer of files and a config with the entrypoint, tagged
// with the reference the pods name, ready for
// `ctr -n k8s.io images import`. This repository's own controller,
// extension, tunnel and etcd-restore, and the cert-manager command built
// from it, are rebuilt on every call.
//
// Ensure builds whatever is missing and returns the images; HostBinaries
// names the Kubernetes and etcd binaries the harness runs as processes.
package images
