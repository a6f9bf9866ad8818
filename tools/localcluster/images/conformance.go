package images

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Conformance is the Kubernetes conformance suite of KubeVersion and the
// images its tests run.
type Conformance struct {
	// Suite is e2e.test, k8s.io/kubernetes/test/e2e compiled as a test
	// binary, and Ginkgo the ginkgo command that runs it in parallel.
	Suite, Ginkgo string
	// Images are the test images, tagged with the references the suite's
	// manifest (test/utils/image/manifest.go) gives them.
	Images []Image
	// Missing are the images the suite lists (e2e.test --list-images) that
	// are neither built here nor among the local cluster's images: a test
	// that runs one of them finds nothing to run, as nothing is pulled.
	Missing []string
}

// The references of the test images, as the suite of KubeVersion names them
// with its default registries.
const (
	e2eRegistry     = "registry.k8s.io/e2e-test-images/"
	AgnhostImage    = e2eRegistry + "agnhost:2.63.0"
	agnhostPrev     = e2eRegistry + "agnhost:2.55"
	busyboxImage    = e2eRegistry + "busybox:1.37.0-1"
	sampleAPIServer = e2eRegistry + "sample-apiserver:1.29.2"
	kittenImage     = e2eRegistry + "kitten:1.8"
	nautilusImage   = e2eRegistry + "nautilus:1.8"
	nginxImage      = e2eRegistry + "nginx:1.15-4"
	nginxNewImage   = e2eRegistry + "nginx:1.27-0"
	nonRootImage    = e2eRegistry + "nonroot:1.5"
	nonewprivsImage = e2eRegistry + "nonewprivs:1.4"
	glibcDNSImage   = e2eRegistry + "glibc-dns-testing:2.0.0"
)

// conformanceDir holds the suite and the Go test images' binaries.
func conformanceDir() string { return "conformance/" + KubeVersion }

// conformanceBuild builds the suite, ginkgo, and the test images' Go
// programs from hack/conformance, which pins k8s.io/kubernetes at
// KubeVersion: agnhost, sample-apiserver, and nonewprivs' nnp.
func conformanceBuild() build {
	ldflags := kubeLDFlags(KubeVersion)
	b := goBuild(conformanceDir(), "hack/conformance", ldflags,
		cmd("k8s.io/kubernetes/test/images/agnhost"),
		target{"k8s.io/kubernetes/test/images/nonewprivs", "nnp"},
		cmd("k8s.io/sample-apiserver"),
		cmd("github.com/onsi/ginkgo/v2/ginkgo"))
	programs := b.run
	b.binaries = append(b.binaries, "e2e.test")
	b.run = func(ctx context.Context, r runner, out string) error {
		if err := programs(ctx, r, out); err != nil {
			return err
		}
		// The suite is the test main of k8s.io/kubernetes/test/e2e
		// (e2e_test.go), which only go test builds.
		return r.run(ctx, filepath.Join(r.root, "hack/conformance"), "go", "test", "-c", "-trimpath", "-buildvcs=false",
			"-ldflags", ldflags, "-o", filepath.Join(out, "e2e.test"), "k8s.io/kubernetes/test/e2e")
	}
	return b
}

// EnsureConformance builds the suite and the test images that are missing
// or out of date under root/bin, as Ensure does for the local cluster's.
func EnsureConformance(ctx context.Context, root string, log io.Writer) (Conformance, error) {
	r := runner{root: root, log: log}
	for _, b := range []build{conformanceBuild(), busyboxBuild()} {
		if err := b.ensure(ctx, r); err != nil {
			return Conformance{}, err
		}
	}
	nginx, err := r.debianPackage(ctx, "nginx")
	if err != nil {
		return Conformance{}, err
	}
	list, err := conformanceCatalog(r, nginx)
	if err != nil {
		return Conformance{}, err
	}
	dir := filepath.Join(r.bin(), conformanceDir())
	c := Conformance{Suite: filepath.Join(dir, "e2e.test"), Ginkgo: filepath.Join(dir, "ginkgo")}
	for _, img := range list {
		tar := Tarball(root, img.ref)
		if img.stale(tar) {
			start := time.Now()
			if err := img.write(tar); err != nil {
				return Conformance{}, fmt.Errorf("image %s: %w", img.ref, err)
			}
			_, _ = fmt.Fprintf(log, "images: wrote %s in %s\n", img.ref, time.Since(start).Round(time.Millisecond))
		}
		c.Images = append(c.Images, Image{Ref: img.ref, Tar: tar})
	}
	if c.Missing, err = c.missing(ctx, root); err != nil {
		return Conformance{}, err
	}
	return c, nil
}

// missing checks the images against the suite's own list and returns the
// listed ones that no image here provides. An image here that the suite
// does not list is an error: its tag is out of date.
func (c Conformance) missing(ctx context.Context, root string) ([]string, error) {
	out, err := exec.CommandContext(ctx, c.Suite, "--list-images").Output()
	if err != nil {
		return nil, fmt.Errorf("e2e.test --list-images: %w", err)
	}
	listed := strings.Fields(string(out))
	provided := map[string]bool{}
	for _, img := range c.Images {
		if !slices.Contains(listed, img.Ref) {
			return nil, fmt.Errorf("the suite lists no image %s: its tag in conformance.go is out of date", img.Ref)
		}
		provided[img.Ref] = true
	}
	for _, img := range catalog(filepath.Join(root, "bin"), nil) {
		provided[img.ref] = true
	}
	return slices.DeleteFunc(listed, func(ref string) bool { return provided[ref] }), nil
}

// conformanceCatalog is every test image this package builds; nginxDir is
// Debian's nginx package, unpacked.
func conformanceCatalog(r runner, nginxDir string) ([]image, error) {
	base, err := r.userland()
	if err != nil {
		return nil, err
	}
	// The tools agnhost's image adds to Alpine, from the host's Debian:
	// dig, curl and nc, and getent, which the DNS tests run.
	// Its shell is Debian's dash, which finds them on the PATH (the
	// Service tests need netcat-openbsd's nc -v).
	tools, err := withLibraries("/usr/bin/dig", "/usr/bin/curl", "/bin/nc.openbsd", "/usr/bin/getent", "/usr/bin/dash")
	if err != nil {
		return nil, fmt.Errorf("agnhost's image needs the host's dig, curl, nc, getent and dash (make conformance-packages): %w", err)
	}
	tools = append(tools, file{path: "/usr/bin/nc", link: "/bin/nc.openbsd"}, file{path: "/bin/sh", link: "/usr/bin/dash"})
	coredns := file{path: "/coredns", src: filepath.Join(r.bin(), "coredns", CoreDNSVersion, "coredns")}
	src, err := r.moduleDir(context.Background(), "hack/conformance", "k8s.io/kubernetes")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(r.bin(), conformanceDir())
	// agnhost's image is Alpine with bind-tools, curl and netcat, the
	// porter's certificate, an upload directory and a user and group the
	// security context tests look up.
	agnhostFiles := slices.Concat(replacing(base, tools), []file{
		{path: "/agnhost", src: filepath.Join(bin, "agnhost")},
		{path: "/agnhost-2", link: "agnhost"},
		coredns,
		{path: "/localhost.crt", src: filepath.Join(src, "test/images/agnhost/porter/localhost.crt")},
		{path: "/localhost.key", src: filepath.Join(src, "test/images/agnhost/porter/localhost.key")},
		{path: "/uploads", dir: true},
	})
	agnhost := func(ref string, extra ...file) image {
		return image{ref: ref, entrypoint: []string{"/agnhost"}, cmd: []string{"pause"}, files: slices.Concat(agnhostFiles, extra)}
	}
	// kitten and nautilus are agnhost serving a picture.
	webserver := func(ref, name string) image {
		html := filepath.Join(src, "test/images", name, "html")
		img := agnhost(ref, file{path: "/" + name + ".jpg", src: filepath.Join(html, name+".jpg")},
			file{path: "/data.json", src: filepath.Join(html, "data.json")})
		img.cmd = []string{"test-webserver"}
		return img
	}
	// The DNS tests' glibc prober: Debian with dnsutils and CoreDNS.
	glibcDNS := image{ref: glibcDNSImage, cmd: []string{"sh"}, files: slices.Concat(replacing(base, tools), []file{coredns})}
	busybox := image{ref: busyboxImage, cmd: []string{"sh"}, files: base}
	nonroot := image{ref: nonRootImage, cmd: []string{"sh"}, user: "1234", files: base}
	nonewprivs := image{ref: nonewprivsImage, cmd: []string{"nnp"}, files: append(slices.Clone(base),
		file{path: "/usr/local/bin/nnp", src: filepath.Join(bin, "nnp"), mode: 0o4755})}
	apiserver := image{ref: sampleAPIServer, entrypoint: []string{"/sample-apiserver"}, files: append(slices.Clone(base),
		file{path: "/sample-apiserver", src: filepath.Join(bin, "sample-apiserver")})}
	nginxFiles, err := nginxFiles(nginxDir)
	if err != nil {
		return nil, err
	}
	nginx := func(ref string) image {
		return image{ref: ref, cmd: []string{"nginx", "-g", "daemon off;"}, files: slices.Concat(base, nginxFiles)}
	}
	return []image{
		agnhost(AgnhostImage),
		// The previous agnhost the suite rolls Deployments from: the same
		// program under the older tag, which is all the tests compare.
		agnhost(agnhostPrev),
		webserver(kittenImage, "kitten"), webserver(nautilusImage, "nautilus"),
		busybox, nonroot, nonewprivs, apiserver, glibcDNS,
		nginx(nginxImage), nginx(nginxNewImage),
	}, nil
}

// userland is a minimal root filesystem: BusyBox (busyboxBuild) with a link
// for each of its applets, its shell among them, and the users and groups
// of the upstream images.
func (r runner) userland() ([]file, error) {
	const busybox = "/bin/busybox"
	built := r.busybox()
	out, err := exec.Command(built, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("the test images need BusyBox built into bin/ (make conformance-images): %w", err)
	}
	files := []file{{path: busybox, src: built}}
	// Each applet at the path Debian's configuration gives it and, as the
	// upstream image has them all there, in /bin (the sysctl test runs
	// /bin/sysctl, /sbin/sysctl here).
	seen := map[string]bool{busybox: true}
	for _, applet := range strings.Fields(string(out)) {
		for _, p := range []string{"/" + applet, "/bin/" + path.Base(applet)} {
			if !seen[p] {
				seen[p] = true
				files = append(files, file{path: p, link: busybox})
			}
		}
	}
	return append(files,
		file{path: "/etc/passwd", data: []byte("root:x:0:0:root:/root:/bin/sh\n" +
			"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		file{path: "/etc/group", data: []byte("root:x:0:\nuser-defined-in-image:x:1000:\n" +
			"group-defined-in-image:x:50000:user-defined-in-image\nnogroup:x:65534:\n")},
		// glibc's programs (dig, curl, getent) look names up in /etc/hosts
		// first, as Debian's and Alpine's images have them do.
		file{path: "/etc/nsswitch.conf", data: []byte("hosts: files dns\n")},
		file{path: "/tmp", dir: true, mode: 0o1777},
		file{path: "/root", dir: true, mode: 0o700},
	), nil
}

// replacing is base with the files of tools in place of those at the same
// paths (a BusyBox applet where the real program is added).
func replacing(base, tools []file) []file {
	paths := map[string]bool{}
	for _, f := range tools {
		paths[f.path] = true
	}
	return append(slices.DeleteFunc(slices.Clone(base), func(f file) bool { return paths[f.path] }), tools...)
}

// nginxConf serves a page on port 80 and logs to the container's output,
// as the nginx image does. It leaves daemon to the command line (nginx -g
// "daemon off;", the image's command), which refuses it set twice.
const nginxConf = `user nobody nogroup;
error_log /dev/stderr;
pid /run/nginx.pid;
events {}
http {
  access_log /dev/stdout;
  server {
    listen 80;
    root /usr/share/nginx/html;
  }
}
`

// nginxFiles are the nginx binary of Debian's package unpacked at dir, with
// the host's libraries it loads, a configuration and a welcome page.
func nginxFiles(dir string) ([]file, error) {
	binary := filepath.Join(dir, "usr/sbin/nginx")
	files, err := withLibraries(binary)
	if err != nil {
		return nil, err
	}
	// withLibraries places the binary at its host path.
	files[0].path = "/usr/sbin/nginx"
	return append(files,
		file{path: "/etc/nginx/nginx.conf", data: []byte(nginxConf)},
		file{path: "/usr/share/nginx/html/index.html", data: []byte("<h1>Welcome to nginx!</h1>\n")},
		file{path: "/var/lib/nginx", dir: true},
		file{path: "/var/log/nginx", dir: true},
		file{path: "/run", dir: true},
	), nil
}

// debianPackage is the directory Debian's package pkg is unpacked in under
// bin/debian, downloaded (not installed: nginx's would start a server on the
// host) when not there yet.
func (r runner) debianPackage(ctx context.Context, pkg string) (string, error) {
	debian := filepath.Join(r.bin(), "debian")
	found, _ := filepath.Glob(filepath.Join(debian, pkg+"_*"))
	if found = slices.DeleteFunc(found, func(d string) bool { return strings.HasSuffix(d, ".tmp") }); len(found) > 0 {
		return found[0], nil
	}
	tmp, err := os.MkdirTemp("", "debian-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	// apt downloads as its own user, _apt.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.MkdirAll(debian, 0o755); err != nil {
		return "", err
	}
	if err := r.run(ctx, tmp, "apt-get", "download", pkg); err != nil {
		// The package lists may never have been fetched.
		if err := r.run(ctx, tmp, "apt-get", "update", "-qq"); err != nil {
			return "", err
		}
		if err := r.run(ctx, tmp, "apt-get", "download", pkg); err != nil {
			return "", err
		}
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, pkg+"_*.deb"))
	if len(debs) != 1 {
		return "", fmt.Errorf("apt-get download %s: want one package, got %v", pkg, debs)
	}
	// Unpacked aside and moved in, so that a directory in place is complete.
	dir := filepath.Join(debian, strings.TrimSuffix(filepath.Base(debs[0]), ".deb"))
	if err := os.RemoveAll(dir + ".tmp"); err != nil {
		return "", err
	}
	if err := r.run(ctx, tmp, "dpkg-deb", "-x", debs[0], dir+".tmp"); err != nil {
		return "", err
	}
	return dir, os.Rename(dir+".tmp", dir)
}
