// Command devenv is `make dev`: a local API server (kube-apiserver and etcd
// built from source) with the provider's, Cluster API's, cert-manager's and
// Gateway API's CRDs, cert-manager's controllers, the real controller
// serving its admission webhooks and reconciling, a Gateway, and the samples
// of config/samples applied. Nothing runs pods here, so the sample control
// plane stops at etcd; its conditions show how far it got. It runs until
// interrupted.
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

	"k8s.io/apimachinery/pkg/util/yaml"

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
	samples = append([]string{filepath.Join(env.Root, "test", "envtest", "devenv", "gateway.yaml")}, samples...)
	for _, sample := range samples {
		if err := apply(env, sample); err != nil {
			return fmt.Errorf("apply %s: %w", sample, err)
		}
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
		if err := env.Client.Create(context.Background(), obj); err != nil {
			return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}
