package images

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An image tarball holds its files under their directories, owned by root
// with fixed times, and a config that runs the entrypoint; written twice, it
// is the same.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755))
	img := image{ref: "hostedcp.test/tool:v1", entrypoint: []string{"/usr/local/bin/tool"}, cmd: []string{"serve"}, user: nonRoot, files: []file{
		{path: "/usr/sbin/alias", link: "tool"},
		{path: "/usr/local/bin/tool", src: bin},
		{path: "/usr/local/bin/setuid", src: bin, mode: 0o4755},
		{path: "/etc/tool.conf", data: []byte("key: value\n")},
		{path: "/tmp", dir: true, mode: 0o1777},
		{path: "/usr/local", dir: true},
	}}
	tar1, tar2 := filepath.Join(dir, "1.tar"), filepath.Join(dir, "2.tar")
	require.NoError(t, img.write(tar1))
	require.NoError(t, img.write(tar2))
	b1, err := os.ReadFile(tar1)
	require.NoError(t, err)
	b2, err := os.ReadFile(tar2)
	require.NoError(t, err)
	assert.Equal(t, b1, b2, "reproducible")
	assert.False(t, img.stale(tar1))
	changed := img
	changed.cmd = []string{"other"}
	assert.True(t, changed.stale(tar1), "written from another description")

	tag, err := name.NewTag(img.ref)
	require.NoError(t, err)
	v, err := tarball.ImageFromPath(tar1, &tag)
	require.NoError(t, err)
	cfg, err := v.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "linux", cfg.OS)
	assert.Equal(t, "amd64", cfg.Architecture)
	assert.Equal(t, img.entrypoint, cfg.Config.Entrypoint)
	assert.Equal(t, img.cmd, cfg.Config.Cmd)
	assert.Equal(t, nonRoot, cfg.Config.User)
	assert.Equal(t, []string{imagePath}, cfg.Config.Env)

	layers, err := v.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	var entries []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		assert.Zero(t, h.Uid)
		assert.Zero(t, h.ModTime.Unix())
		entry := fmt.Sprintf("%s %c %s %o", h.Name, h.Typeflag, h.Linkname, h.Mode)
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			entry += " " + string(b)
		}
		entries = append(entries, entry)
	}
	assert.Equal(t, []string{
		"etc/ 5  755", "etc/tool.conf 0  644 key: value\n", "tmp/ 5  1777",
		"usr/ 5  755", "usr/local/ 5  755", "usr/local/bin/ 5  755", "usr/local/bin/setuid 0  4755 #!/bin/true\n",
		"usr/local/bin/tool 0  755 #!/bin/true\n", "usr/sbin/ 5  755", "usr/sbin/alias 2 tool 777",
	}, entries)
}
