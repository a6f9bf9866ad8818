package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRegistriesAllow(t *testing.T) {
	allowed, err := ParseRegistries(" registry.k8s.io, registry.example.com:5000/team ,Mirror.Example.com/k8s,docker.io/library,")
	require.NoError(t, err)
	assert.Equal(t, "registry.k8s.io, registry.example.com:5000/team, mirror.example.com/k8s, docker.io/library", allowed.String())
	for image, want := range map[string]bool{
		"registry.k8s.io/kube-apiserver:v1.36.3":        true,
		"registry.k8s.io/kas-network-proxy/proxy-agent": true,
		"REGISTRY.K8S.IO/etcd:3.6.8-0":                  true, // hosts are names in DNS, whatever their case
		"registry.k8s.io.evil.com/kube-apiserver:v1":    false,
		"evil.com/registry.k8s.io/kube-apiserver:v1":    false,
		"registry.k8s.io:443/kube-apiserver:v1":         false, // another port is another server
		"registry.k8s.io@evil.com/kube-apiserver":       false, // not an image name at all
		"registry.example.com:5000/team/etcd:3.6":       true,
		"registry.example.com:5000/team":                true,
		"registry.example.com:5000/teamevil/etcd:3.6":   false, // a path prefix ends at a "/"
		"registry.example.com/team/etcd:3.6":            false, // the port is part of the registry
		"mirror.example.com/k8s/kube-apiserver:v1":      true,
		"mirror.example.com/kube-apiserver:v1":          false,
		"nginx:1.27":                                    true, // docker.io/library/nginx, as a runtime reads it
		"docker.io/team/nginx:1.27":                     false,
		"team/nginx:1.27":                               false, // docker.io/team/nginx
		"registry.k8s.io/etcd@sha256:" + sha:            true,
	} {
		assert.Equal(t, want, allowed.Allows(image), image)
	}
	none, err := ParseRegistries("")
	require.NoError(t, err)
	assert.True(t, none.Allows("evil.com/x:y"), "an empty list allows any registry")
	assert.Equal(t, "any", none.String())

	hub, err := ParseRegistries("docker.io")
	require.NoError(t, err)
	assert.True(t, hub.Allows("team/app:1"), "docker.io is all of Docker Hub, not only its library")
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParseRegistriesRefuses(t *testing.T) {
	for _, entry := range []string{
		"https://registry.k8s.io", "registry.k8s.io/", "registry.k8s.io:v1", "registry.k8s.io/kube-apiserver:v1",
		"team", "Registry.example.com/Team", "registry.k8s.io@sha256:" + sha, "registry k8s io",
	} {
		_, err := ParseRegistries("registry.k8s.io," + entry)
		if assert.Error(t, err, entry) {
			assert.Contains(t, err.Error(), "use a registry host with an optional port and path")
		}
	}
}

// "*" alone allows any registry, as an empty list does: clusterctl takes no
// empty default for a variable.
func TestAnyRegistry(t *testing.T) {
	for _, list := range []string{"", AnyRegistry, " * "} {
		r, err := ParseRegistries(list)
		require.NoError(t, err, list)
		assert.Empty(t, r, list)
	}
	_, err := ParseRegistries("*,registry.k8s.io")
	assert.Error(t, err, "* is not a registry among others")
}
