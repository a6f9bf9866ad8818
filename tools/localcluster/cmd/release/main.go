package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
)

// ProviderDir is the directory of the provider in a clusterctl repository:
// its type and name, as clusterctl labels its objects.
const ProviderDir = "control-plane-hosted-control-plane"

func main() {
	version := flag.String("version", "", "the release, such as v0.2.0")
	out := flag.String("out", "dist", "the clusterctl repository directory to write into")
	kustomize := flag.String("kustomize", os.Getenv("KUSTOMIZE"), "the kustomize binary")
	source := flag.String("source", "", "the tree to release (its cmd/, config/release and metadata.yaml); this repository when empty")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, *version, *out, *kustomize, *source)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// run writes release version of the tree source (this repository when
// empty) into out.
func run(ctx context.Context, version, out, kustomize, source string) error {
	v, err := semver.Parse(strings.TrimPrefix(version, "v"))
	if err != nil || !strings.HasPrefix(version, "v") {
		return fmt.Errorf("VERSION %q: use a release such as v0.2.0", version)
	}
	if kustomize == "" {
		return errors.New("no kustomize: set KUSTOMIZE or -kustomize")
	}
	root, err := sourceRoot(source)
	if err != nil {
		return err
	}
	metadata, err := os.ReadFile(filepath.Join(root, "metadata.yaml"))
	if err != nil {
		return err
	}
	if err := hasSeries(metadata, v); err != nil {
		return err
	}
	dir, err := filepath.Abs(filepath.Join(out, ProviderDir, version))
	if err != nil {
		return err
	}
	built, err := images.Release(ctx, root, version, dir, os.Stderr)
	if err != nil {
		return err
	}
	bundle, err := render(ctx, root, kustomize, built)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "control-plane-components.yaml"), bundle, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "metadata.yaml"), metadata, 0o644); err != nil {
		return err
	}
	for _, name := range []string{"controller", "extension", "tunnel", "etcd-restore"} {
		img := built[name]
		fmt.Printf("%s@%s\t%s\n", images.Repository(name), img.Digest, img.Archive)
	}
	fmt.Println(filepath.Join(dir, "control-plane-components.yaml"))
	return nil
}

// sourceRoot is the absolute path of source, or of this repository when
// source is empty.
func sourceRoot(source string) (string, error) {
	if source == "" {
		return envtest.RepoRoot()
	}
	return filepath.Abs(source)
}

// hasSeries checks that metadata.yaml names the release series of v.
func hasSeries(metadata []byte, v semver.Version) error {
	var m struct {
		ReleaseSeries []struct {
			Major, Minor uint64
			Contract     string
		} `json:"releaseSeries"`
	}
	if err := yaml.Unmarshal(metadata, &m); err != nil {
		return fmt.Errorf("metadata.yaml: %w", err)
	}
	for _, s := range m.ReleaseSeries {
		if s.Major == v.Major && s.Minor == v.Minor {
			return nil
		}
	}
	return fmt.Errorf("metadata.yaml has no release series %d.%d: add it, with the contract it implements", v.Major, v.Minor)
}

// render builds config/release with the release's images pinned by digest:
// the controller's and the extension's containers, and the tunnel and
// etcd-restore images the controller's settings name.
func render(ctx context.Context, root, kustomize string, built map[string]images.Released) ([]byte, error) {
	// kustomize takes a base by a relative path only.
	if err := os.MkdirAll(filepath.Join(root, "dist"), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Join(root, "dist"), ".kustomize-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	base, err := filepath.Rel(tmp, filepath.Join(root, "config", "release"))
	if err != nil {
		return nil, err
	}
	pinned := func(name string) string { return images.Repository(name) + "@" + built[name].Digest }
	kustomization := fmt.Sprintf("resources:\n- %s\nimages:\n", base)
	for _, name := range []string{"controller", "extension"} {
		kustomization += fmt.Sprintf("- name: %s\n  newName: %s\n  digest: %s\n", images.Repository(name), images.Repository(name), built[name].Digest)
	}
	if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kustomize, "build", tmp)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kustomize build: %w: %s", err, stderr.String())
	}
	settings := map[string]string{"TUNNEL_IMAGE": pinned("tunnel"), "ETCD_RESTORE_IMAGE": pinned("etcd-restore")}
	bundle, err := pinSettings(stdout.Bytes(), settings)
	if err != nil {
		return nil, err
	}
	return quoteVariables(bundle), nil
}

// variable is a YAML value that is a clusterctl variable alone.
var variable = regexp.MustCompile(`(?m)^(\s*(?:- )?[A-Za-z]+: )(\$\{[A-Z0-9_]+:=[^}"]*\})$`)

// quoteVariables quotes every value that is a clusterctl variable, which
// YAML writers leave plain: clusterctl substitutes text, and a value such as
// 10 or * must stay a string.
func quoteVariables(bundle []byte) []byte {
	return variable.ReplaceAll(bundle, []byte(`$1"$2"`))
}

// pinSettings sets the environment variables of the controller's container
// named in settings.
func pinSettings(bundle []byte, settings map[string]string) ([]byte, error) {
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(bundle), 4096)
	var out bytes.Buffer
	set := 0
	for {
		obj, err := envtest.DecodeObject(d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if obj.GetKind() == "Deployment" && obj.GetName() == "hcp-controller" {
			if set, err = setEnv(obj, settings); err != nil {
				return nil, err
			}
		}
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(data)
	}
	if set != len(settings) {
		return nil, fmt.Errorf("the controller's Deployment in config/release sets %d of %d image settings", set, len(settings))
	}
	return out.Bytes(), nil
}

func setEnv(obj *unstructured.Unstructured, settings map[string]string) (int, error) {
	containers, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return 0, fmt.Errorf("controller Deployment: %w", err)
	}
	if len(containers) == 0 {
		return 0, errors.New("controller Deployment without containers")
	}
	c := containers[0].(map[string]any)
	env, _ := c["env"].([]any)
	set := 0
	for _, e := range env {
		e := e.(map[string]any)
		if value, ok := settings[e["name"].(string)]; ok {
			e["value"] = value
			set++
		}
	}
	return set, unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", "containers")
}
