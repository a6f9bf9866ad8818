package images

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every test image has a distinct reference and what it runs among its
// files: its entrypoint, or its command on the PATH. agnhost's image has
// the real dig, curl and nc instead of BusyBox's applets, with the libraries
// they load; nonewprivs' nnp is setuid; every image has a shell, BusyBox's
// own in BusyBox's image. It needs the host packages make
// conformance-packages installs, and builds BusyBox when bin/ has none.
func TestConformanceCatalog(t *testing.T) {
	r := runner{root: filepath.Join("..", "..", ".."), log: testWriter{t}}
	require.NoError(t, busyboxBuild().ensure(context.Background(), r))
	// Any dynamically linked program stands in for Debian's nginx here.
	nginx := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(nginx, "usr/sbin"), 0o755))
	data, err := os.ReadFile("/usr/bin/curl")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(nginx, "usr/sbin/nginx"), data, 0o755))

	list, err := conformanceCatalog(r, nginx)
	require.NoError(t, err)
	refs := map[string]image{}
	for _, img := range list {
		_, dup := refs[img.ref]
		assert.False(t, dup, img.ref)
		refs[img.ref] = img
		files := map[string]file{}
		for _, f := range img.files {
			_, dup := files[f.path]
			assert.False(t, dup, "%s: %s twice", img.ref, f.path)
			files[f.path] = f
		}
		run := slices.Concat(img.entrypoint, img.cmd)
		require.NotEmpty(t, run, img.ref)
		if len(img.entrypoint) == 0 && !strings.HasPrefix(run[0], "/") {
			assert.True(t, onPath(files, run[0]), "%s: %s on the PATH", img.ref, run[0])
		} else {
			assert.Contains(t, files, run[0], img.ref)
		}
		assert.Contains(t, files, "/bin/sh", img.ref)
	}
	assert.Len(t, list, 11)
	agnhost := map[string]file{}
	for _, f := range refs[AgnhostImage].files {
		agnhost[f.path] = f
	}
	for _, tool := range []string{"/usr/bin/dig", "/usr/bin/curl", "/bin/nc.openbsd", "/usr/bin/getent"} {
		assert.NotEmpty(t, agnhost[tool].src, "the host's %s", tool)
	}
	assert.Equal(t, "/bin/nc.openbsd", agnhost["/usr/bin/nc"].link, "nc is netcat-openbsd, not BusyBox's")
	assert.Contains(t, agnhost, "/lib64/ld-linux-x86-64.so.2", "the dynamic loader")
	assert.Equal(t, "/bin/busybox", agnhost["/usr/bin/wget"].link)
	assert.Equal(t, "/usr/bin/dash", agnhost["/bin/sh"].link, "a shell that looks commands up on the PATH")
	nnp := refs[nonewprivsImage].files[len(refs[nonewprivsImage].files)-1]
	assert.Equal(t, file{path: "/usr/local/bin/nnp", src: filepath.Join("..", "..", "..", "bin", conformanceDir(), "nnp"), mode: 0o4755}, nnp)
	assert.Equal(t, "1234", refs[nonRootImage].user)
	busybox := map[string]file{}
	for _, f := range refs[busyboxImage].files {
		busybox[f.path] = f
	}
	assert.Equal(t, "/bin/busybox", busybox["/bin/sh"].link, "BusyBox's shell")
	assert.Equal(t, "/bin/busybox", busybox["/bin/sysctl"].link, "every applet in /bin, as upstream")
	assert.Equal(t, "/bin/busybox", busybox["/sbin/sysctl"].link)
}

// The images' BusyBox behaves as the upstream image's, which the conformance
// tests compare output with: its shell passes variables whose names are not
// shell names on to the commands it runs (the Secret and ConfigMap tests
// print data-1=value-1 with sh -c env; Debian's BusyBox drops it), and it
// reports a file it cannot create in BusyBox's words (the kubelet's
// read-only root filesystem test).
func TestBusyBoxShell(t *testing.T) {
	r := runner{root: filepath.Join("..", "..", ".."), log: testWriter{t}}
	require.NoError(t, busyboxBuild().ensure(context.Background(), r))
	busybox := r.busybox()
	sh := func(script string, env ...string) string {
		c := &exec.Cmd{Path: busybox, Args: []string{"/bin/sh", "-c", script}, Env: env}
		out, err := c.CombinedOutput()
		t.Logf("sh -c %q: %v: %s", script, err, out)
		return string(out)
	}
	assert.Contains(t, strings.Split(sh(busybox+" env", "data-1=value-1", "PATH=/bin"), "\n"), "data-1=value-1")
	assert.Equal(t, "/bin/sh: can't create /nonexistent/file: nonexistent directory\n", sh("echo test > /nonexistent/file"))
	assert.True(t, strings.HasPrefix(sh(busybox+" --help"), "BusyBox v"+BusyBoxVersion+" "), "BusyBox %s", BusyBoxVersion)
}

// onPath reports whether name is found on the images' PATH among files.
func onPath(files map[string]file, name string) bool {
	for _, dir := range strings.Split(strings.TrimPrefix(imagePath, "PATH="), ":") {
		if _, ok := files[dir+"/"+name]; ok {
			return true
		}
	}
	return false
}
