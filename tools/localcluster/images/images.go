package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Image is a container image as an OCI tarball.
type Image struct {
	// Ref is the reference the image is tagged with inside the tarball,
	// such as registry.k8s.io/kube-apiserver:v1.36.3.
	Ref string
	// Tar is the path of the tarball.
	Tar string
}

// image is how one image is made.
type image struct {
	ref        string
	entrypoint []string
	// cmd is the image's default arguments to the entrypoint, or its
	// command when there is no entrypoint.
	cmd []string
	// user is the image's default user; empty is root, as in the upstream
	// image.
	user  string
	files []file
	// fresh images are written on every call: this repository's own.
	fresh bool
}

// nonRoot is the user of the distroless "nonroot" images the Cluster API,
// cert-manager and this repository's images are based on upstream.
const nonRoot = "65532:65532"

// upstream is the reference of an image of registry.k8s.io.
func upstream(repository, tag string) string { return "registry.k8s.io/" + repository + ":" + tag }

// binaryImage is an image that runs the binary at dst, copied from src.
func binaryImage(ref, src, dst string, extra ...file) image {
	return image{ref: ref, entrypoint: []string{dst}, files: append([]file{{path: dst, src: src}}, extra...)}
}

// rootImage is an image whose binary sits at its root, as upstream builds
// konnectivity, CoreDNS, pause and Cluster API's and this repository's
// images.
func rootImage(ref, src string) image { return binaryImage(ref, src, "/"+filepath.Base(src)) }

// catalog is every image, given the host's netfilter tools for kube-proxy
// and kube-router (iptables, conntrack, ipset).
// Kubernetes components and etcd sit in /usr/local/bin, where the pods'
// commands find them on PATH.
func catalog(bin string, netfilter []file) []image {
	kube := func(component, version string, extra ...file) image {
		return binaryImage(upstream(component, version), filepath.Join(bin, "kube", version, component),
			"/usr/local/bin/"+component, extra...)
	}
	var list []image
	for _, v := range []string{KubeVersion, PreviousKubeVersion} {
		for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			list = append(list, kube(c, v))
		}
	}
	konnectivity := filepath.Join(bin, "konnectivity", KonnectivityVersion)
	capi := rootImage(upstream("cluster-api/cluster-api-controller", CAPIVersion), filepath.Join(bin, "capi", CAPIVersion, "manager"))
	capi.user = nonRoot
	list = append(list,
		kube("kube-proxy", KubeVersion, netfilter...),
		binaryImage(upstream("etcd", EtcdTag), filepath.Join(bin, "kube", KubeVersion, "etcd"), "/usr/local/bin/etcd"),
		rootImage(upstream("coredns/coredns", CoreDNSVersion), filepath.Join(bin, "coredns", CoreDNSVersion, "coredns")),
		rootImage(upstream("kas-network-proxy/proxy-server", KonnectivityVersion), filepath.Join(konnectivity, "proxy-server")),
		rootImage(upstream("kas-network-proxy/proxy-agent", KonnectivityVersion), filepath.Join(konnectivity, "proxy-agent")),
		rootImage(upstream("pause", PauseVersion), filepath.Join(bin, "pause", PauseVersion, "pause")),
		// Traefik's own image has its binary at the root too, and runs as root.
		rootImage(TraefikImage, filepath.Join(bin, "traefik", TraefikVersion, "traefik")),
		binaryImage(KubeRouterImage, filepath.Join(bin, "kube-router", KubeRouterVersion, "kube-router"), "/usr/local/bin/kube-router", netfilter...),
		capi,
	)
	for _, own := range []struct{ ref, binary string }{
		{"hostedcp.test/cert-manager:" + CertManagerVersion, "cert-manager"},
		{"ghcr.io/hostedcp/cluster-api-provider-hosted-controller:" + DevTag, "controller"},
		{"ghcr.io/hostedcp/cluster-api-provider-hosted-extension:" + DevTag, "extension"},
		{"ghcr.io/hostedcp/cluster-api-provider-hosted-tunnel:" + DevTag, "tunnel"},
		{"ghcr.io/hostedcp/cluster-api-provider-hosted-etcd-restore:" + DevTag, "etcd-restore"},
		{ProbeImage, "probe"},
	} {
		img := rootImage(own.ref, filepath.Join(bin, "dev", own.binary))
		img.user, img.fresh = nonRoot, true
		list = append(list, img)
	}
	return list
}

// Ensure builds the binaries and images that are missing or out of date
// under root/bin (root is the repository's root), one build at a time, and
// returns every image. Progress and build output go to log.
func Ensure(ctx context.Context, root string, log io.Writer) ([]Image, error) {
	r := runner{root: root, log: log}
	for _, b := range builds() {
		if err := b.ensure(ctx, r); err != nil {
			return nil, err
		}
	}
	netfilter, err := netfilterTools()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(r.bin(), "images"), 0o755); err != nil {
		return nil, err
	}
	var out []Image
	for _, img := range catalog(r.bin(), netfilter) {
		tar := Tarball(root, img.ref)
		if img.fresh || img.stale(tar) {
			start := time.Now()
			if err := img.write(tar); err != nil {
				return nil, fmt.Errorf("image %s: %w", img.ref, err)
			}
			_, _ = fmt.Fprintf(log, "images: wrote %s in %s\n", img.ref, time.Since(start).Round(time.Millisecond))
		}
		out = append(out, Image{Ref: img.ref, Tar: tar})
	}
	return out, nil
}

// TraefikImage is the management cluster's Gateway API implementation.
const TraefikImage = "docker.io/library/traefik:" + TraefikVersion

// KubeRouterImage enforces NetworkPolicies in the management cluster.
const KubeRouterImage = "docker.io/cloudnativelabs/kube-router:" + KubeRouterVersion

// ProbeImage runs tools/localcluster/cmd/probe, which checks DNS and the API server
// from inside a pod.
const ProbeImage = "hostedcp.test/probe:" + DevTag

// Tarball is where Ensure writes the image ref under root, the repository's
// root.
func Tarball(root, ref string) string { return filepath.Join(root, "bin", "images", tarName(ref)) }

// HostBinaries are the paths of the KubeVersion binaries the harness runs as
// processes, by name: kube-apiserver, kube-controller-manager,
// kube-scheduler, kubelet, kube-proxy, kubeadm, kubectl and etcd. Ensure
// builds them.
func HostBinaries(root string) map[string]string {
	dir := filepath.Join(root, "bin", "kube", KubeVersion)
	out := map[string]string{}
	for _, name := range kubeBuild().binaries {
		out[name] = filepath.Join(dir, name)
	}
	return out
}

// tarName is the tarball's file name for ref.
func tarName(ref string) string {
	return strings.NewReplacer("/", "_", ":", "_").Replace(ref) + ".tar"
}

// stale reports whether the tarball at tar is missing, was written from
// another description of the image (its key differs), or is older than one
// of the files it is made of.
func (img image) stale(tar string) bool {
	st, err := os.Stat(tar)
	if err != nil {
		return true
	}
	if key, err := os.ReadFile(tar + ".key"); err != nil || string(key) != img.key() {
		return true
	}
	for _, f := range img.files {
		if f.src == "" {
			continue
		}
		if src, err := os.Stat(f.src); err != nil || src.ModTime().After(st.ModTime()) {
			return true
		}
	}
	return false
}

// key is a digest of everything the image is made of but the contents of
// the host files it copies (whose times stale compares).
func (img image) key() string {
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "%q %q %q %q\n", img.ref, img.entrypoint, img.cmd, img.user)
	for _, f := range img.files {
		_, _ = fmt.Fprintf(h, "%q %q %q %v %o %x\n", f.path, f.src, f.link, f.dir, f.mode, sha256.Sum256(f.data))
	}
	return hex.EncodeToString(h.Sum(nil))
}
