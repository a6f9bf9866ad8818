package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
)

// required is the version of module the go.mod at path requires.
func required(t *testing.T, path, module string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", path))
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require ")); len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("%s requires no %s", path, module)
	return ""
}

// The constants name the releases the hack/ modules build, and the images
// the pods of hosted control planes render by default.
func TestVersionsMatchModulesAndPods(t *testing.T) {
	assert.Equal(t, KubeVersion, required(t, "hack/kube/go.mod", "k8s.io/kubernetes"))
	assert.Equal(t, KubeVersion, required(t, "hack/conformance/go.mod", "k8s.io/kubernetes"))
	assert.Equal(t, PreviousKubeVersion, required(t, "hack/kube-"+PreviousKubeVersion+"/go.mod", "k8s.io/kubernetes"))
	assert.Equal(t, EtcdVersion, required(t, "hack/kube/go.mod", "go.etcd.io/etcd/server/v3"))
	assert.Equal(t, CoreDNSVersion, required(t, "hack/coredns/go.mod", "github.com/coredns/coredns"))
	assert.Equal(t, KonnectivityVersion, required(t, "hack/konnectivity/go.mod", "sigs.k8s.io/apiserver-network-proxy"))
	assert.Equal(t, CAPIVersion, required(t, "hack/capi/go.mod", "sigs.k8s.io/cluster-api"))
	assert.Equal(t, TraefikVersion, required(t, "hack/traefik/go.mod", "github.com/traefik/traefik/v3"))
	assert.Equal(t, KubeRouterVersion, required(t, "hack/kube-router/go.mod", "github.com/cloudnativelabs/kube-router/v2"))
	assert.Equal(t, CertManagerVersion, required(t, "go.mod", "github.com/cert-manager/cert-manager"))

	kube := semver.MustParse(strings.TrimPrefix(KubeVersion, "v"))
	assert.Equal(t, EtcdTag, components.EtcdTag(kube))
	assert.Equal(t, KonnectivityVersion, components.KonnectivityTag(kube))
	assert.True(t, strings.HasPrefix(EtcdTag, strings.TrimPrefix(EtcdVersion, "v")+"-"))
}

// Every image has a distinct reference and tarball, an entrypoint among its
// files, and the pods' commands resolve on its PATH.
func TestCatalog(t *testing.T) {
	list := catalog("/bin-root", nil)
	refs, tars := map[string]bool{}, map[string]bool{}
	for _, img := range list {
		assert.False(t, refs[img.ref], img.ref)
		assert.False(t, tars[tarName(img.ref)], img.ref)
		refs[img.ref], tars[tarName(img.ref)] = true, true
		require.Len(t, img.entrypoint, 1, img.ref)
		assert.Contains(t, paths(img.files), img.entrypoint[0], img.ref)
	}
	for _, want := range []string{
		"registry.k8s.io/kube-apiserver:" + PreviousKubeVersion, "registry.k8s.io/etcd:" + EtcdTag,
		"registry.k8s.io/kas-network-proxy/proxy-server:" + KonnectivityVersion, "registry.k8s.io/pause:" + PauseVersion,
		"docker.io/library/traefik:" + TraefikVersion, KubeRouterImage,
		"ghcr.io/hostedcp/cluster-api-provider-hosted-controller:dev", "ghcr.io/hostedcp/cluster-api-provider-hosted-tunnel:dev", ProbeImage,
		"ghcr.io/hostedcp/cluster-api-provider-hosted-etcd-restore:dev",
	} {
		assert.True(t, refs[want], want)
	}
	assert.Len(t, list, 21)
	assert.Equal(t, "/bin-root/kube/"+KubeVersion+"/kube-scheduler", list[2].files[0].src)
	assert.Equal(t, "/usr/local/bin/kube-scheduler", list[2].files[0].path)
	assert.Equal(t, filepath.Join("root", "bin", "kube", KubeVersion, "etcd"), HostBinaries("root")["etcd"])
	assert.Len(t, HostBinaries("root"), 8)
}

func paths(files []file) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.path)
	}
	return out
}
