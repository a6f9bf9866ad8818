package provider

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
)

// Config says where the pieces come from.
type Config struct {
	// Root is the repository; dist/control-plane-components.yaml must exist.
	Root string
	// Kustomize renders Cluster API's manifests from its module.
	Kustomize string
	// CertManagerCRDs, ClusterAPIConfig and GatewayAPICRDs (the standard
	// channel's) are directories in the module cache.
	CertManagerCRDs, ClusterAPIConfig, GatewayAPICRDs string
	// Images run by the installed Deployments.
	CertManagerImage, ClusterAPIImage, TraefikImage string
	// WithoutProvider leaves this project's provider out, for clusterctl
	// to install.
	WithoutProvider bool
}

//go:embed manifests/cert-manager.yaml
var certManagerManifest string

//go:embed manifests/gateway.yaml
var gatewayManifest string

//go:embed manifests/infrastructure.yaml
var infrastructureManifest []byte

// The Gateway hosted control planes are served through, as the samples and
// users' manifests name it.
const (
	GatewayName      = "capi"
	GatewayNamespace = "capi-system"
)

// Install installs cert-manager, Cluster API, the Gateway API with Traefik
// and the Gateway capi/capi-system, and the provider, each waiting for the
// one before it, and returns once the provider's controller and extension
// are available and Cluster API has discovered the extension.
func Install(ctx context.Context, c client.Client, cfg Config) error {
	steps := []struct {
		what string
		run  func(context.Context, client.Client, Config) error
	}{
		{"cert-manager", installCertManager},
		{"Cluster API", installClusterAPI},
		{"Gateway API and Traefik", installGateway},
		{"hosted control plane provider", installProvider},
	}
	if cfg.WithoutProvider {
		steps = steps[:len(steps)-1]
	}
	for _, s := range steps {
		if err := s.run(ctx, c, cfg); err != nil {
			return fmt.Errorf("install %s: %w", s.what, err)
		}
	}
	return nil
}

func installCertManager(ctx context.Context, c client.Client, cfg Config) error {
	if err := applyDir(ctx, c, cfg.CertManagerCRDs); err != nil {
		return err
	}
	if err := applyTemplate(ctx, c, "cert-manager", certManagerManifest, map[string]string{"Image": cfg.CertManagerImage}); err != nil {
		return err
	}
	return WaitAvailable(ctx, c, "cert-manager", "cert-manager")
}

// applyDir applies every YAML file of dir, in name order.
func applyDir(ctx context.Context, c client.Client, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no YAML files in %s (%w)", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := cluster.Apply(ctx, c, b, ""); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

// applyTemplate applies the YAML stream text after filling in data.
func applyTemplate(ctx context.Context, c client.Client, name, text string, data map[string]string) error {
	tmpl, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, data); err != nil {
		return err
	}
	return cluster.Apply(ctx, c, out.Bytes(), "")
}

// installGateway installs the Gateway API's standard channel CRDs and
// Traefik, and creates the Gateway capi/capi-system with a TLS passthrough
// listener on *.cluster.GatewayDomain; it returns once the Gateway is
// programmed at cluster.GatewayAddress.
func installGateway(ctx context.Context, c client.Client, cfg Config) error {
	if err := applyDir(ctx, c, cfg.GatewayAPICRDs); err != nil {
		return err
	}
	if err := applyTemplate(ctx, c, "gateway", gatewayManifest, map[string]string{
		"Image": cfg.TraefikImage, "Address": cluster.GatewayAddress, "Domain": cluster.GatewayDomain,
	}); err != nil {
		return err
	}
	if err := WaitAvailable(ctx, c, "traefik", "traefik"); err != nil {
		return err
	}
	return cluster.Poll(ctx, 2*time.Minute, time.Second, func(ctx context.Context) error {
		return GatewayProgrammed(ctx, c, client.ObjectKey{Namespace: GatewayNamespace, Name: GatewayName})
	}, nil)
}

// GatewayProgrammed checks that the Gateway key is programmed at
// cluster.GatewayAddress, as its controller reports.
func GatewayProgrammed(ctx context.Context, c client.Client, key client.ObjectKey) error {
	gw := &gatewayv1.Gateway{}
	if err := c.Get(ctx, key, gw); err != nil {
		return err
	}
	programmed := apimeta.FindStatusCondition(gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed))
	if programmed == nil || programmed.Status != metav1.ConditionTrue || programmed.ObservedGeneration < gw.Generation {
		return fmt.Errorf("gateway %s is not programmed yet: %+v", key, gw.Status.Conditions)
	}
	for _, a := range gw.Status.Addresses {
		if a.Value == cluster.GatewayAddress {
			return nil
		}
	}
	return fmt.Errorf("gateway %s has addresses %+v, not %s", key, gw.Status.Addresses, cluster.GatewayAddress)
}

// clusterctlVariable matches clusterctl's ${NAME:=default} placeholders.
var clusterctlVariable = regexp.MustCompile(`\$\{([A-Z0-9_]+):=([^}]*)\}`)

// clusterAPIVariables are the clusterctl variables set as users set them to
// run ClusterClasses and Runtime SDK extensions; the rest keep their defaults.
var clusterAPIVariables = map[string]string{"CLUSTER_TOPOLOGY": "true", "EXP_RUNTIME_SDK": "true"}

// RenderClusterAPI builds Cluster API's core provider manifests from its
// module with kustomize and fills clusterctl's variables, as clusterctl init
// does with the release's core-components.yaml; the manager runs image.
func RenderClusterAPI(kustomize, configDir, image string) ([]byte, error) {
	out, err := exec.Command(kustomize, "build", filepath.Join(configDir, "default")).Output()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", configDir, err)
	}
	out = clusterctlVariable.ReplaceAllFunc(out, func(m []byte) []byte {
		parts := clusterctlVariable.FindSubmatch(m)
		if v, ok := clusterAPIVariables[string(parts[1])]; ok {
			return []byte(v)
		}
		return parts[2]
	})
	text := regexp.MustCompile(`image: \S*cluster-api-controller:\S+`).ReplaceAllString(string(out), "image: "+image)
	// Images are imported, never pulled.
	text = strings.ReplaceAll(text, "imagePullPolicy: Always", "imagePullPolicy: IfNotPresent")
	return []byte(text), nil
}

func installClusterAPI(ctx context.Context, c client.Client, cfg Config) error {
	manifests, err := RenderClusterAPI(cfg.Kustomize, cfg.ClusterAPIConfig, cfg.ClusterAPIImage)
	if err != nil {
		return err
	}
	// With the local cluster's infrastructure clusters (LocalCluster), as a
	// cloud's infrastructure provider is installed beside Cluster API.
	if err := cluster.Apply(ctx, c, append(manifests, append([]byte("\n---\n"), infrastructureManifest...)...), ""); err != nil {
		return err
	}
	if err := WaitAvailable(ctx, c, "capi-system", "capi-controller-manager"); err != nil {
		return err
	}
	// cert-manager's cainjector fills the conversion webhook's CA into the
	// CRDs; until it has, v1beta1 manifests fail.
	return cluster.Poll(ctx, 2*time.Minute, time.Second, func(ctx context.Context) error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: "clusters.cluster.x-k8s.io"}, crd); err != nil {
			return err
		}
		if conv := crd.Spec.Conversion; conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil || len(conv.Webhook.ClientConfig.CABundle) == 0 {
			return fmt.Errorf("CRD %s has no conversion webhook CA yet", crd.Name)
		}
		return nil
	}, nil)
}

func installProvider(ctx context.Context, c client.Client, cfg Config) error {
	bundle, err := os.ReadFile(filepath.Join(cfg.Root, "dist", "control-plane-components.yaml"))
	if err != nil {
		return fmt.Errorf("%w (make manifests writes it)", err)
	}
	if err := cluster.Apply(ctx, c, bundle, ""); err != nil {
		return err
	}
	for _, name := range []string{"hcp-controller", "hcp-extension"} {
		if err := WaitAvailable(ctx, c, "hosted-control-plane-system", name); err != nil {
			return err
		}
	}
	return cluster.Poll(ctx, 2*time.Minute, time.Second, func(ctx context.Context) error { return ExtensionDiscovered(ctx, c) }, nil)
}

// ExtensionDiscovered tells whether Cluster API has discovered the
// provider's Runtime SDK extension.
func ExtensionDiscovered(ctx context.Context, c client.Client) error {
	ext := &unstructured.Unstructured{}
	ext.SetGroupVersionKind(schema.GroupVersionKind{Group: "runtime.cluster.x-k8s.io", Version: "v1beta2", Kind: "ExtensionConfig"})
	if err := c.Get(ctx, client.ObjectKey{Name: "hcp-extension"}, ext); err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(ext.Object, "status", "conditions")
	for _, cond := range conds {
		m, _ := cond.(map[string]any)
		if m["type"] == "Discovered" && m["status"] == string(metav1.ConditionTrue) {
			return nil
		}
	}
	return fmt.Errorf("ExtensionConfig hcp-extension not discovered yet: %v", conds)
}

// WaitAvailable waits until every replica of a Deployment is available.
func WaitAvailable(ctx context.Context, c client.Client, namespace, name string) error {
	return cluster.Poll(ctx, 5*time.Minute, time.Second, func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, d); err != nil {
			return err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want || d.Status.AvailableReplicas < want {
			return fmt.Errorf("deployment %s/%s: %d of %d replicas available", namespace, name, d.Status.AvailableReplicas, want)
		}
		return nil
	}, nil)
}
