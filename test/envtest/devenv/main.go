package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"

	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devenv:", err)
		os.Exit(1)
	}
}

func run() error {
	env, err := envtest.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	stopCertManager, err := envtest.StartCertManager(context.Background(), env.Kubeconfig, nil)
	if err != nil {
		return err
	}
	defer func() { _ = stopCertManager() }()
	dir := filepath.Join(env.Root, "bin", "dev")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	controller, err := env.StartController(dir)
	if err != nil {
		return err
	}
	defer func() { _ = controller.Stop(30 * time.Second) }()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := copyFile(env.Kubeconfig, kubeconfig); err != nil {
		return err
	}
	samples, err := filepath.Glob(filepath.Join(env.Root, "config", "samples", "*.yaml"))
	if err != nil {
		return err
	}
	// The quickstart's Cluster names a LocalCluster, the local management
	// cluster's infrastructure kind.
	samples = append([]string{
		filepath.Join(env.Root, "test", "envtest", "devenv", "gateway.yaml"),
		filepath.Join(env.Root, "tools", "localcluster", "provider", "manifests", "infrastructure.yaml"),
	}, samples...)
	for _, sample := range samples {
		if err := apply(env, sample); err != nil {
			return fmt.Errorf("apply %s: %w", sample, err)
		}
	}
	if err := adoptControlPlanes(env); err != nil {
		return err
	}
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	fmt.Printf(`
Local API server with the hosted control plane CRDs and webhooks is up.

  export KUBECONFIG=%s
  %s get hostedcontrolplanes,hostedcontrolplanetemplates -A
  %s get hostedcontrolplane demo -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}'

Press Ctrl-C to stop.
`, kubeconfig, kubectl, kubectl)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}

func apply(env *envtest.Env, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	decoder := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		obj, err := envtest.DecodeObject(decoder)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		// A kind whose CRD was just created is served once it is established.
		var created error
		_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			created = env.Client.Create(ctx, obj)
			return !meta.IsNoMatchError(created), nil
		})
		if err := created; err != nil {
			return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// adoptControlPlanes sets each control plane's owner reference to its
// Cluster, as Cluster API's core controller would; it does not run here.
func adoptControlPlanes(env *envtest.Env) error {
	ctx := context.Background()
	hcps := &v1alpha1.HostedControlPlaneList{}
	if err := env.Client.List(ctx, hcps); err != nil {
		return err
	}
	for i := range hcps.Items {
		hcp := &hcps.Items[i]
		cluster := &clusterv1.Cluster{}
		key := client.ObjectKey{Namespace: hcp.Namespace, Name: hcp.Labels[clusterv1.ClusterNameLabel]}
		if err := env.Client.Get(ctx, key, cluster); err != nil {
			continue
		}
		// A patch, not an update: the controller may have written the
		// control plane since it was listed.
		before := hcp.DeepCopy()
		hcp.OwnerReferences = append(hcp.OwnerReferences, metav1.OwnerReference{
			APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID,
		})
		if err := env.Client.Patch(ctx, hcp, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("adopt %s: %w", hcp.Name, err)
		}
	}
	return nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}
