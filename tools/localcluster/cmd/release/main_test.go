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
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/settings"
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
	require.NoError(t, run(context.Background(), "v0.1.0", out, kustomize, ""))
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
		"HCP_OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "HCP_OTEL_TRACES_SAMPLER", "HCP_OTEL_TRACES_SAMPLER_ARG",
		"HCP_WORKLOAD_HEALTH_PROBE_INTERVAL",
	} {
		assert.Contains(t, described, "  - "+v+"\n")
	}

	components := ctl([]string{"HCP_LOG_LEVEL=debug"}, "generate", "provider", "--control-plane", "hosted-control-plane")
	assert.NotContains(t, components, "${")
	env := deploymentEnv(t, components, "hcp-controller")
	assert.Equal(t, "debug", env["LOG_LEVEL"], "a variable set is used")
	assert.Equal(t, "json", env["LOG_FORMAT"], "one unset takes its default")
	assert.Equal(t, "10", env["MAX_CONCURRENT_RECONCILES"], "a number stays a string")
	assert.Equal(t, "*", env["ALLOWED_IMAGE_REGISTRIES"])
	assert.Contains(t, components, "cluster.x-k8s.io/provider: control-plane-hosted-control-plane")
	tracesOffByDefault(t, components)

	components = ctl([]string{
		"HCP_OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://collector.observability:4317",
		"HCP_OTEL_TRACES_SAMPLER=traceidratio", "HCP_OTEL_TRACES_SAMPLER_ARG=0",
	}, "generate", "provider", "--control-plane", "hosted-control-plane")
	for _, name := range []string{"hcp-controller", "hcp-extension"} {
		env := deploymentEnv(t, components, name)
		assert.Equal(t, "http://collector.observability:4317", readSettings(t, name, env).TracesEndpoint(), "%s traces", name)
		assert.False(t, sampled(t, env), "%s: traceidratio 0 samples no trace", name)
	}

	for _, name := range []string{"controller", "extension", "tunnel", "etcd-restore"} {
		digest := archiveDigest(t, filepath.Join(dir, "images", name+".tar"))
		assert.Contains(t, components, "ghcr.io/hostedcp/cluster-api-provider-hosted-"+name+"@"+digest, "%s is pinned to its archive", name)
	}
}

// tracesOffByDefault checks that the release's defaults leave tracing off
// in the controller and the extension, as each reads its settings, and keep
// the SDK's own sampler (parent-based always-on: a new trace is sampled).
func tracesOffByDefault(t *testing.T, components string) {
	t.Helper()
	for _, name := range []string{"hcp-controller", "hcp-extension"} {
		env := deploymentEnv(t, components, name)
		assert.Equal(t, "none", env["OTEL_EXPORTER_OTLP_ENDPOINT"], name)
		assert.Equal(t, "none", env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"], name)
		assert.Equal(t, "parentbased_always_on", env["OTEL_TRACES_SAMPLER"], name)
		assert.Equal(t, "1.0", env["OTEL_TRACES_SAMPLER_ARG"], name)
		assert.Empty(t, readSettings(t, name, env).TracesEndpoint(), "%s: no traces by default", name)
		assert.True(t, sampled(t, env), "%s: the default sampler samples a new trace", name)
	}
}

// readSettings reads the settings of the Deployment name (hcp-controller or
// hcp-extension) from env as the binary does.
func readSettings(t *testing.T, name string, env map[string]string) settings.Serving {
	t.Helper()
	// What the pod has beside its environment: its namespace and the
	// serving certificate mounted.
	certs := t.TempDir()
	for _, f := range []string{"tls.crt", "tls.key"} {
		require.NoError(t, os.WriteFile(filepath.Join(certs, f), nil, 0o600))
	}
	getenv := func(key string) string {
		switch key {
		case "CONTROLLER_NAMESPACE":
			return "hosted-control-plane-system"
		case "WEBHOOK_CERT_DIR":
			return certs
		}
		return env[key]
	}
	if name == "hcp-extension" {
		s, err := settings.ParseExtension(nil, getenv, io.Discard)
		require.NoError(t, err, name)
		return s.Serving
	}
	s, err := settings.ParseController(nil, getenv, io.Discard)
	require.NoError(t, err, name)
	return s.Serving
}

// sampled tells whether a tracer provider of the OpenTelemetry SDK, as the
// binaries make one, samples a new trace under env's OTEL_TRACES_SAMPLER*.
func sampled(t *testing.T, env map[string]string) bool {
	t.Helper()
	for _, key := range []string{"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
		t.Setenv(key, env[key])
	}
	var failed error
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { failed = err }))
	provider := sdktrace.NewTracerProvider()
	defer func() { _ = provider.Shutdown(context.Background()) }()
	_, span := provider.Tracer("release-test").Start(context.Background(), "span")
	span.End()
	require.NoError(t, failed, "the SDK refused %s=%q %s=%q", "OTEL_TRACES_SAMPLER", env["OTEL_TRACES_SAMPLER"], "OTEL_TRACES_SAMPLER_ARG", env["OTEL_TRACES_SAMPLER_ARG"])
	return span.SpanContext().IsSampled()
}

// deploymentEnv is the environment of the first container of the
// Deployment name in the components clusterctl generated; a value that is
// not a string fails.
func deploymentEnv(t *testing.T, components, name string) map[string]string {
	t.Helper()
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(components), 4096)
	for {
		obj, err := envtest.DecodeObject(d)
		require.NoError(t, err, "no Deployment %s", name)
		if obj.GetKind() != "Deployment" || obj.GetName() != name {
			continue
		}
		containers, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		require.NoError(t, err)
		env := map[string]string{}
		for _, e := range containers[0].(map[string]any)["env"].([]any) {
			e := e.(map[string]any)
			if v, ok := e["value"]; ok {
				require.IsType(t, "", v, "%s", e["name"])
				env[e["name"].(string)] = v.(string)
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
