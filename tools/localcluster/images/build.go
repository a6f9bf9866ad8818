package images

import (
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"time"
)

// build produces a set of binaries into one directory under bin/.
type build struct {
	dir      string   // under bin/, keyed by version: "kube/v1.36.3"
	binaries []string // the names it writes into dir
	// fresh builds on every call: this repository's own binaries.
	fresh bool
	// run writes the binaries into out, an empty directory.
	run func(ctx context.Context, r runner, out string) error
}

// target is a Go main package and the name of its binary.
type target struct{ pkg, binary string }

// cmd is a main package whose binary takes its name from the package.
func cmd(pkg string) target { return target{pkg, path.Base(pkg)} }

// kubeLDFlags stamp the version Kubernetes components report; Cluster API
// refuses an API server that reports v0.0.0.
func kubeLDFlags(version string) string {
	return "-s -w -X k8s.io/component-base/version.gitVersion=" + version +
		" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=" + minor(version)
}

// goBuild builds targets of the Go module in directory module (relative to
// the repository root) with one go build, which shares the work common to
// them: statically linked (images have no C library), with -trimpath and
// without VCS stamps so that the same source gives the same binaries.
func goBuild(dir, module, ldflags string, targets ...target) build {
	b := build{dir: dir}
	pkgs := []string{}
	for _, t := range targets {
		b.binaries = append(b.binaries, t.binary)
		pkgs = append(pkgs, t.pkg)
	}
	b.run = func(ctx context.Context, r runner, out string) error {
		args := append([]string{"build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out + "/"}, pkgs...)
		if err := r.run(ctx, filepath.Join(r.root, module), "go", args...); err != nil {
			return err
		}
		for _, t := range targets {
			if built := path.Base(t.pkg); built != t.binary {
				if err := os.Rename(filepath.Join(out, built), filepath.Join(out, t.binary)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return b
}

// pauseBuild compiles the sandbox's pause binary from the pause.c of
// Kubernetes release KubeVersion, as that release's pause image does.
func pauseBuild() build {
	return build{dir: "pause/" + PauseVersion, binaries: []string{"pause"}, run: func(ctx context.Context, r runner, out string) error {
		src, err := r.moduleDir(ctx, "hack/kube", "k8s.io/kubernetes")
		if err != nil {
			return err
		}
		return r.run(ctx, r.root, "gcc", "-Os", "-static", "-DVERSION="+PauseVersion,
			"-o", filepath.Join(out, "pause"), filepath.Join(src, "build/pause/linux/pause.c"))
	}}
}

// kubeBuild builds the KubeVersion binaries the harness runs as processes,
// and those of its images.
func kubeBuild() build {
	return goBuild("kube/"+KubeVersion, "hack/kube", kubeLDFlags(KubeVersion),
		cmd("k8s.io/kubernetes/cmd/kube-apiserver"), cmd("k8s.io/kubernetes/cmd/kube-controller-manager"),
		cmd("k8s.io/kubernetes/cmd/kube-scheduler"), cmd("k8s.io/kubernetes/cmd/kubelet"),
		cmd("k8s.io/kubernetes/cmd/kube-proxy"), cmd("k8s.io/kubernetes/cmd/kubeadm"),
		cmd("k8s.io/kubernetes/cmd/kubectl"), cmd("./etcd"))
}

// builds are every build, in the order Ensure runs them: what the harness
// runs as processes first, the upgrade's older release last.
func builds() []build {
	// This repository's binaries: the product's, and the two the local
	// cluster runs in pods, from this tool's own module.
	own := goBuild("dev", ".", "-s -w", cmd("./cmd/controller"), cmd("./cmd/extension"), cmd("./cmd/tunnel"), cmd("./cmd/etcd-restore"))
	own.fresh = true
	harness := goBuild("dev", "tools/localcluster", "-s -w", cmd("./cmd/cert-manager"), cmd("./cmd/probe"))
	harness.fresh = true
	return []build{
		kubeBuild(),
		pauseBuild(),
		goBuild("coredns/"+CoreDNSVersion, "hack/coredns", "-s -w", cmd("github.com/hostedcp/cluster-api-provider-hosted/hack/coredns")),
		goBuild("konnectivity/"+KonnectivityVersion, "hack/konnectivity", "-s -w",
			target{"sigs.k8s.io/apiserver-network-proxy/cmd/server", "proxy-server"},
			target{"sigs.k8s.io/apiserver-network-proxy/cmd/agent", "proxy-agent"}),
		goBuild("traefik/"+TraefikVersion, "hack/traefik", "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version="+TraefikVersion,
			cmd("github.com/traefik/traefik/v3/cmd/traefik")),
		goBuild("kube-router/"+KubeRouterVersion, "hack/kube-router", "-s -w",
			target{"github.com/cloudnativelabs/kube-router/v2/cmd/kube-router", "kube-router"}),
		goBuild("capi/"+CAPIVersion, "hack/capi", "-s -w -X sigs.k8s.io/cluster-api/version.gitVersion="+CAPIVersion,
			target{"sigs.k8s.io/cluster-api/core", "manager"}),
		own,
		harness,
		goBuild("kube/"+PreviousKubeVersion, "hack/kube-"+PreviousKubeVersion, kubeLDFlags(PreviousKubeVersion),
			cmd("k8s.io/kubernetes/cmd/kube-apiserver"), cmd("k8s.io/kubernetes/cmd/kube-controller-manager"),
			cmd("k8s.io/kubernetes/cmd/kube-scheduler")),
	}
}

// ensure runs b unless every binary it makes is in place and statically
// linked (a binary built by other means with cgo cannot run in an image).
func (b build) ensure(ctx context.Context, r runner) error {
	dir := filepath.Join(r.bin(), b.dir)
	if !b.fresh && allStatic(dir, b.binaries) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Built aside and moved in, so that an interrupted build leaves nothing
	// that looks finished.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	_, _ = fmt.Fprintf(r.log, "images: building bin/%s %v\n", b.dir, b.binaries)
	if err := b.run(ctx, r, tmp); err != nil {
		return fmt.Errorf("build bin/%s: %w", b.dir, err)
	}
	for _, name := range b.binaries {
		if err := os.Rename(filepath.Join(tmp, name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	_, _ = fmt.Fprintf(r.log, "images: built bin/%s in %s\n", b.dir, time.Since(start).Round(time.Second))
	return nil
}

// allStatic reports whether each named file in dir is a statically linked
// executable.
func allStatic(dir string, names []string) bool {
	for _, name := range names {
		f, err := elf.Open(filepath.Join(dir, name))
		if err != nil {
			return false
		}
		dynamic := f.Section(".interp") != nil
		for _, p := range f.Progs {
			dynamic = dynamic || p.Type == elf.PT_INTERP
		}
		_ = f.Close()
		if dynamic {
			return false
		}
	}
	return true
}

// runner runs the build commands of the repository at root.
type runner struct {
	root string
	log  io.Writer
}

func (r runner) bin() string { return filepath.Join(r.root, "bin") }

// run runs name with args in dir, its output going to the log.
func (r runner) run(ctx context.Context, dir, name string, args ...string) error {
	c := exec.CommandContext(ctx, name, args...)
	c.Dir, c.Stdout, c.Stderr = dir, r.log, r.log
	c.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s %v: %w", name, args, err)
	}
	return nil
}

// moduleDir is the directory of module in the module cache, at the version
// the Go module in directory module (relative to the root) requires.
func (r runner) moduleDir(ctx context.Context, dir, module string) (string, error) {
	c := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	c.Dir, c.Stderr = filepath.Join(r.root, dir), r.log
	out, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", err
	}
	if m.Dir == "" {
		return "", errors.New("go mod download " + module + ": no directory")
	}
	return m.Dir, nil
}
