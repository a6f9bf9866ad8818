package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
)

// A release as clusterctl reads it, through a real clusterctl (built by
// `make clusterctl` at the Cluster API version hack/capi pins) from a local
// repository: the version from the directory and metadata.yaml, the
// variables with their defaults, the images pinned by digest, and the OCI
// archives holding exactly those images.
func TestClusterctlReadsTheRelease(t *testing.T) {
	clusterctl, kustomize := os.Getenv("CLUSTERCTL"), os.Getenv("KUSTOMIZE")
	if clusterctl == "" || kustomize == "" {
		t.Skip("set CLUSTERCTL and KUSTOMIZE, as make unit does")
	}
	out := t.TempDir()
	require.NoError(t, run(context.Background(), "v0.1.0", out, kustomize))
	dir := filepath.Join(out, ProviderDir, "v0.1.0")
	bundle, err := os.ReadFile(filepath.Join(dir, "control-plane-components.yaml"))
	require.NoError(t, err)

	all := regexp.MustCompile(`\$\{[^}]*\}`).FindAllString(string(bundle), -1)
	require.NotEmpty(t, all)
	for _, v := range all {
		assert.Regexp(t, `^\$\{HCP_[A-Z_]+:=[^}]*\}$`, v, "every variable has a default")
	}

	config := filepath.Join(t.TempDir(), "clusterctl.yaml")
	require.NoError(t, os.WriteFile(config, []byte("providers:\n- name: hosted-control-plane\n  type: ControlPlaneProvider\n  url: file://"+
		filepath.Join(dir, "control-plane-components.yaml")+"\n"), 0o600))
	ctl := func(env []string, args ...string) string {
		cmd := exec.Command(clusterctl, append(args, "--config", config)...)
		cmd.Env = append(append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir()), env...)
		got, err := cmd.CombinedOutput()
		require.NoError(t, err, "clusterctl %v: %s", args, got)
		return string(got)
	}
	described := ctl(nil, "generate", "provider", "--control-plane", "hosted-control-plane", "--describe")
	assert.Contains(t, described, "Version:            v0.1.0")
	assert.Contains(t, described, "TargetNamespace:    hosted-control-plane-system")
	for _, v := range []string{
		"HCP_ALLOWED_IMAGE_REGISTRIES", "HCP_LOG_FORMAT", "HCP_LOG_LEVEL", "HCP_MAX_CONCURRENT_BACKUPS",
		"HCP_MAX_CONCURRENT_RECONCILES", "HCP_MIN_BACKUP_INTERVAL", "HCP_MUST_ROLL_INTERVAL", "HCP_OTEL_EXPORTER_OTLP_ENDPOINT",
	} {
		assert.Contains(t, described, "  - "+v+"\n")
	}

	components := ctl([]string{"HCP_LOG_LEVEL=debug"}, "generate", "provider", "--control-plane", "hosted-control-plane")
	assert.NotContains(t, components, "${")
	env := controllerEnv(t, components)
	assert.Equal(t, "debug", env["LOG_LEVEL"], "a variable set is used")
	assert.Equal(t, "json", env["LOG_FORMAT"], "one unset takes its default")
	assert.Equal(t, "10", env["MAX_CONCURRENT_RECONCILES"], "a number stays a string")
	assert.Equal(t, "*", env["ALLOWED_IMAGE_REGISTRIES"])
	assert.Equal(t, "none", env["OTEL_EXPORTER_OTLP_ENDPOINT"])
	assert.Contains(t, components, "cluster.x-k8s.io/provider: control-plane-hosted-control-plane")

	for _, name := range []string{"controller", "extension", "tunnel", "etcd-restore"} {
		digest := archiveDigest(t, filepath.Join(dir, "images", name+".tar"))
		assert.Contains(t, components, "ghcr.io/hostedcp/cluster-api-provider-hosted-"+name+"@"+digest, "%s is pinned to its archive", name)
	}
}

// controllerEnv is the environment of the controller's container in the
// components clusterctl generated; a value that is not a string fails.
func controllerEnv(t *testing.T, components string) map[string]any {
	t.Helper()
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(components), 4096)
	for {
		obj, err := envtest.DecodeObject(d)
		require.NoError(t, err, "no controller Deployment")
		if obj.GetKind() != "Deployment" || obj.GetName() != "hcp-controller" {
			continue
		}
		containers, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		require.NoError(t, err)
		env := map[string]any{}
		for _, e := range containers[0].(map[string]any)["env"].([]any) {
			e := e.(map[string]any)
			if v, ok := e["value"]; ok {
				require.IsType(t, "", v, "%s", e["name"])
				env[e["name"].(string)] = v
			}
		}
		return env
	}
}

// archiveDigest is the digest of the one image of an OCI archive.
func archiveDigest(t *testing.T, archive string) string {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s has no index.json", archive)
		}
		require.NoError(t, err)
		if strings.TrimPrefix(hdr.Name, "./") != "index.json" {
			continue
		}
		var index struct {
			Manifests []struct{ Digest string } `json:"manifests"`
		}
		require.NoError(t, json.NewDecoder(tr).Decode(&index))
		require.Len(t, index.Manifests, 1)
		return index.Manifests[0].Digest
	}
}
