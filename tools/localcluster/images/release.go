package images

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Released is one image of a release: the reference it is tagged with, its
// digest and the OCI archive that holds it.
type Released struct {
	Ref, Digest, Archive string
}

// Repository is where the release's image of name (controller, extension,
// tunnel, etcd-restore) is published.
func Repository(name string) string { return "ghcr.io/hostedcp/cluster-api-provider-hosted-" + name }

// Release builds this repository's four binaries with contract.Release set to
// version and writes each image, tagged <Repository>:<version>, as an OCI
// archive (an OCI image layout in a tar file) into dir/images, returning
// them by binary name. The binaries and the images' layers are
// reproducible, so one version built twice has the same digests.
func Release(ctx context.Context, root, version, dir string, log io.Writer) (map[string]Released, error) {
	r := runner{root: root, log: log}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, err
	}
	names := []string{"controller", "extension", "tunnel", "etcd-restore"}
	ldflags := "-s -w -X github.com/hostedcp/cluster-api-provider-hosted/internal/contract.Release=" + version
	build := goBuild("", ".", ldflags, cmd("./cmd/controller"), cmd("./cmd/extension"), cmd("./cmd/tunnel"), cmd("./cmd/etcd-restore"))
	if err := build.run(ctx, r, bin); err != nil {
		return nil, fmt.Errorf("build %s: %w", version, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "images"), 0o755); err != nil {
		return nil, err
	}
	out := map[string]Released{}
	for _, name := range names {
		img := rootImage(Repository(name)+":"+version, filepath.Join(bin, name))
		img.user = nonRoot
		archive := filepath.Join(dir, "images", name+".tar")
		digest, err := img.writeOCI(archive)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", img.ref, err)
		}
		out[name] = Released{Ref: img.ref, Digest: digest, Archive: archive}
	}
	return out, os.RemoveAll(bin)
}

// writeOCI writes the image as an OCI archive to dst, its reference in the
// index's org.opencontainers.image.ref.name annotation (what
// `ctr images import` names it by), and returns its manifest digest.
func (img image) writeOCI(dst string) (string, error) {
	v, done, err := img.build()
	if err != nil {
		return "", err
	}
	defer done()
	digest, err := v.Digest()
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".oci-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return "", err
	}
	if err := p.AppendImage(v, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": img.ref})); err != nil {
		return "", err
	}
	return digest.String(), tarDir(tmp, dst)
}
