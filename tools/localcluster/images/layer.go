package images

import (
	"archive/tar"
	"cmp"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// file is one file of an image: a copy of a host file, a file of given
// contents, a symbolic link or an empty directory.
type file struct {
	path string // absolute, in the image
	src  string // on the host; empty for the other kinds
	data []byte // the contents of a file not copied from the host
	link string // the target of a link
	dir  bool   // an empty directory, which a program expects to exist
	// mode is the permission bits, setuid included, when not the source
	// file's (or 0o644 for data).
	mode int64
}

// imagePath is the PATH of every image, where pods' commands that name no
// directory are looked up.
const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// write writes the image as a tarball to dst, tagged with its reference.
func (img image) write(dst string) error {
	tag, err := name.NewTag(img.ref)
	if err != nil {
		return err
	}
	v, done, err := img.build()
	if err != nil {
		return err
	}
	defer done()
	// Written aside and moved in: a tarball in place is a complete one.
	tmp := dst + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, v); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return os.WriteFile(dst+".key", []byte(img.key()), 0o644)
}

// build is the image: an empty image with one layer of its files and a
// config with its entrypoint, user and PATH. The layer is read from a file
// as the image is written; done removes it.
func (img image) build() (v1.Image, func(), error) {
	layerFile, err := os.CreateTemp("", ".layer-")
	if err != nil {
		return nil, nil, err
	}
	done := func() { _ = os.Remove(layerFile.Name()) }
	v, err := img.assemble(layerFile)
	if err != nil {
		done()
		return nil, nil, err
	}
	return v, done, nil
}

func (img image) assemble(layerFile *os.File) (v1.Image, error) {
	if err := img.writeLayer(layerFile); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromFile(layerFile.Name(), tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, err
	}
	v, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := v.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config = v1.Config{Entrypoint: img.entrypoint, Cmd: img.cmd, Env: []string{imagePath}, User: img.user}
	return mutate.ConfigFile(v, cfg)
}

// tarDir writes the files under dir into a tar file at dst, by their paths
// relative to dir, in a fixed order with fixed times.
func tarDir(dir, dst string) error {
	f, err := os.Create(dst + ".tmp")
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o755, ModTime: time.Unix(0, 0)})
		}
		return writeFile(tw, file{path: "/" + rel, src: p}, time.Unix(0, 0))
	})
	if cerr := closeAll(tw, f); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(dst+".tmp", dst)
}

// writeLayer writes the image's files, and the directories above them, to
// w as a tar stream, in order and with fixed times and owners so that the
// same files give the same layer.
func (img image) writeLayer(w io.WriteCloser) error {
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	files := slices.SortedFunc(slices.Values(img.files), func(a, b file) int { return strings.Compare(a.path, b.path) })
	for _, f := range files {
		var parents []string
		for d := path.Dir(f.path); d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			parents = append(parents, d)
		}
		slices.Reverse(parents)
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return err
			}
		}
		if f.dir {
			// Written once, as a parent of a later file would be.
			if dirs[f.path] {
				continue
			}
			dirs[f.path] = true
		}
		if err := writeFile(tw, f, epoch); err != nil {
			return err
		}
	}
	return closeAll(tw, w)
}

func writeFile(tw *tar.Writer, f file, modTime time.Time) error {
	switch {
	case f.dir:
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: f.path[1:] + "/", Mode: cmp.Or(f.mode, 0o755), ModTime: modTime})
	case f.src == "" && f.link != "":
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: f.path[1:], Linkname: f.link, Mode: 0o777, ModTime: modTime})
	case f.src == "":
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.path[1:], Size: int64(len(f.data)), Mode: cmp.Or(f.mode, 0o644), ModTime: modTime}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(f.data)
		return err
	}
	src, err := os.Open(f.src)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.path[1:], Size: st.Size(), Mode: cmp.Or(f.mode, int64(st.Mode().Perm())), ModTime: modTime}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, src)
	return err
}

func closeAll(closers ...io.Closer) error {
	for _, c := range closers {
		if err := c.Close(); err != nil {
			return err
		}
	}
	return nil
}

// Debian's nf_tables iptables and conntrack, which kube-proxy runs, and
// ipset, which kube-router runs too.
const (
	xtablesMulti = "/usr/sbin/xtables-nft-multi"
	conntrack    = "/usr/sbin/conntrack"
	xtablesLib   = "/usr/lib/x86_64-linux-gnu/xtables"
	ipset        = "/usr/sbin/ipset"
)

// iptablesCommands are the names kube-proxy runs iptables by; each is a
// link to xtablesMulti, which acts by the name it is run as.
var iptablesCommands = []string{
	"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore",
	"iptables-nft", "iptables-nft-save", "iptables-nft-restore", "ip6tables-nft", "ip6tables-nft-save", "ip6tables-nft-restore",
}

// netfilterTools are the host's iptables (nf_tables variant) with its
// extension modules, conntrack and ipset, with the shared libraries they
// load, at the paths they have on the host.
func netfilterTools() ([]file, error) {
	for _, p := range []string{xtablesMulti, conntrack, xtablesLib, ipset} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("kube-proxy's and kube-router's images need the host's iptables, conntrack and ipset (apt-get install iptables conntrack ipset): %w", err)
		}
	}
	modules, err := filepath.Glob(filepath.Join(xtablesLib, "*.so"))
	if err != nil {
		return nil, err
	}
	files, err := withLibraries(append([]string{xtablesMulti, conntrack, ipset}, modules...)...)
	if err != nil {
		return nil, err
	}
	for _, c := range iptablesCommands {
		files = append(files, file{path: "/usr/sbin/" + c, link: path.Base(xtablesMulti)})
	}
	return files, nil
}

// withLibraries are the executables at paths, with the shared libraries
// they load, at the paths they have on the host (a library's symbolic link
// resolved to its file).
func withLibraries(paths ...string) ([]file, error) {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return nil, err
		}
	}
	libs, err := sharedLibraries(paths)
	if err != nil {
		return nil, err
	}
	var files []file
	for _, p := range append(slices.Clone(paths), libs...) {
		src, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, err
		}
		files = append(files, file{path: p, src: src})
	}
	return files, nil
}

// sharedLibraries are the libraries ldd reports the executables and
// modules in paths load, the dynamic loader included, without duplicates.
func sharedLibraries(paths []string) ([]string, error) {
	out, err := exec.Command("ldd", paths...).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd: %w", err)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "=> not found") {
			return nil, fmt.Errorf("ldd: a library is missing on this host: %s", strings.TrimSpace(line))
		}
		fields := strings.Fields(line)
		var lib string
		switch {
		case len(fields) >= 3 && fields[1] == "=>":
			lib = fields[2]
		case len(fields) >= 1 && strings.HasPrefix(fields[0], "/") && !strings.HasSuffix(fields[0], ":"):
			lib = fields[0]
		}
		if strings.HasPrefix(lib, "/") && !slices.Contains(libs, lib) {
			libs = append(libs, lib)
		}
	}
	slices.Sort(libs)
	return libs, nil
}
