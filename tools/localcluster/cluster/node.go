package cluster

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// containerdConfig follows notes/real-kubelet.md: our pause image, the
// Debian CNI plugins with our own configuration directory, runc with cgroupfs,
// no lowering of oom_score_adj (the machine lacks CAP_SYS_RESOURCE), and
// network namespaces mounted under the state directory so that teardown
// finds them.
func (c *Cluster) containerdConfig() string {
	return containerdConfig(c.layout.path("containerd"), c.layout.containerdSocket(), c.cfg.Images.Pause, c.layout.path("cni"))
}

// containerdConfig is the configuration of a containerd keeping everything
// under dir (root, state, opt), serving socket, running pause as the sandbox
// and reading CNI configurations from cniDir.
func containerdConfig(dir, socket, pause, cniDir string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_unprivileged_ports = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[6]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), socket, filepath.Join(dir, "opt"), pause, cniDir)
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	config := c.layout.path("containerd", "config.toml")
	if err := os.WriteFile(config, []byte(c.containerdConfig()), 0o600); err != nil {
		return err
	}
	if err := c.start("containerd", "containerd", "--config", config); err != nil {
		return err
	}
	return c.poll(ctx, "containerd", time.Minute, func(ctx context.Context) error {
		_, err := c.ctr(ctx, "version")
		return err
	})
}

// ctr runs containerd's own client against the cluster's containerd.
func (c *Cluster) ctr(ctx context.Context, args ...string) (string, error) {
	return ctrAt(ctx, c.layout.containerdSocket(), args...)
}

// ctrAt runs containerd's own client against the containerd at socket, in
// the namespace the CRI uses.
func ctrAt(ctx context.Context, socket string, args ...string) (string, error) {
	args = append([]string{"--address", socket, "--namespace", "k8s.io"}, args...)
	out, err := exec.CommandContext(ctx, "ctr", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// importImages loads every tarball into the node's image store, where the
// kubelet finds them: nothing is ever pulled.
func (c *Cluster) importImages(ctx context.Context) error {
	return importTarballs(ctx, c.layout.containerdSocket(), c.cfg.Tarballs)
}

// ImportPinned loads OCI archives of one image each, such as a release's
// (make release), into the node's image store, named as each archive's
// index names it and also by its repository and digest, as the release's
// manifests pin it: the kubelet finds a pinned image only by that name, and
// nothing is ever pulled.
func (c *Cluster) ImportPinned(ctx context.Context, archives ...string) error {
	for _, archive := range archives {
		ref, digest, err := archiveImage(archive)
		if err != nil {
			return err
		}
		if err := importTarballs(ctx, c.layout.containerdSocket(), []string{archive}); err != nil {
			return err
		}
		pinned := ref
		if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
			pinned = ref[:i]
		}
		pinned += "@" + digest
		if _, err := c.ctr(ctx, "images", "tag", "--force", ref, pinned); err != nil {
			return err
		}
	}
	return nil
}

// archiveImage is the reference and manifest digest of the one image an OCI
// archive's index.json names.
func archiveImage(archive string) (ref, digest string, err error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", "", fmt.Errorf("%s has no index.json", archive)
		}
		if err != nil {
			return "", "", fmt.Errorf("%s: %w", archive, err)
		}
		if strings.TrimPrefix(hdr.Name, "./") != "index.json" {
			continue
		}
		var index struct {
			Manifests []struct {
				Digest      string            `json:"digest"`
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(tr).Decode(&index); err != nil {
			return "", "", fmt.Errorf("%s: index.json: %w", archive, err)
		}
		if len(index.Manifests) != 1 || index.Manifests[0].Annotations["org.opencontainers.image.ref.name"] == "" {
			return "", "", fmt.Errorf("%s: index.json names %d images, want one with its reference", archive, len(index.Manifests))
		}
		m := index.Manifests[0]
		return m.Annotations["org.opencontainers.image.ref.name"], m.Digest, nil
	}
}

// importTarballs loads OCI image tarballs into the containerd at socket.
func importTarballs(ctx context.Context, socket string, tarballs []string) error {
	for _, tar := range tarballs {
		if _, err := ctrAt(ctx, socket, "images", "import", "--all-platforms", tar); err != nil {
			return err
		}
	}
	return nil
}

// machineKubeletConfig is the start of a KubeletConfiguration with what a
// kubelet needs on this machine, as notes/real-kubelet.md records: cgroup
// v1 with cgroupfs and pods under cgroupRoot, the containerd at socket, no
// swap check, no node allocatable enforcement or local storage isolation,
// and no image garbage collection (every image was imported and none could
// be pulled again). ("none" rather than an empty list: it survives
// kubeadm's round trips through the typed configuration.)
func machineKubeletConfig(cgroupRoot, socket string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
containerRuntimeEndpoint: unix://%s
failSwapOn: false
enforceNodeAllocatable: ["none"]
localStorageCapacityIsolation: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
serializeImagePulls: false
`, cgroupRoot, socket)
}

// kubeletConfig is the machine's settings and the cluster's: its CA,
// webhook authentication and authorization, and cluster DNS.
func (c *Cluster) kubeletConfig() string {
	return machineKubeletConfig(cgroupParent, c.layout.containerdSocket()) + fmt.Sprintf(`authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
clusterDNS: [%q]
clusterDomain: cluster.local
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
staticPodPath: ""
rotateCertificates: false
maxPods: 250
`, c.layout.pki("ca.crt"), DNSServiceIP)
}

func (c *Cluster) startKubelet(ctx context.Context) error {
	if err := makeCgroupParent(); err != nil {
		return err
	}
	config := c.layout.path("kubelet", "config.yaml")
	if err := os.WriteFile(config, []byte(c.kubeletConfig()), 0o600); err != nil {
		return err
	}
	if err := c.start("kubelet", c.cfg.Binaries.Kubelet,
		"--config="+config, "--kubeconfig="+c.layout.kubeconfig("kubelet"),
		"--root-dir="+c.layout.path("kubelet", "root"), "--cert-dir="+c.layout.path("kubelet", "pki"),
		"--hostname-override="+NodeName, "--node-ip="+NodeIP, "--v=1"); err != nil {
		return err
	}
	return c.poll(ctx, "kubelet", 2*time.Minute, func(ctx context.Context) error {
		node := &corev1.Node{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: NodeName}, node); err != nil {
			return err
		}
		return NodeReady(node)
	})
}

// NodeReady fails with the Ready condition's reason and message unless the
// node is Ready.
func NodeReady(node *corev1.Node) error {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status != corev1.ConditionTrue {
				return fmt.Errorf("node %s: %s: %s", node.Name, cond.Reason, cond.Message)
			}
			return nil
		}
	}
	return fmt.Errorf("node %s has no Ready condition yet", node.Name)
}

// makeCgroupParent creates the cgroup every pod lives under, in every
// hierarchy.
func makeCgroupParent() error { return makeCgroup(cgroupParent) }

// makeCgroup creates the cgroup rel (a relative path such as
// hcp-e2e/worker-1), and the cgroups above it, in every hierarchy; a new
// cpuset cgroup starts with no CPUs or memory nodes, so each level gets its
// parent's.
func makeCgroup(rel string) error {
	for _, h := range cgroupHierarchies() {
		dir := h
		for _, part := range strings.Split(filepath.Clean(rel), "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if filepath.Base(h) != "cpuset" {
				continue
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(parent, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", dir, err)
				}
			}
		}
	}
	return nil
}
