package main

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/hooks"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/program"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/settings"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/telemetry"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/topology"
)

func main() {
	program.Main("extension",
		func() (settings.Extension, error) { return settings.ParseExtension(os.Args[1:], os.Getenv, os.Stdout) },
		func(c settings.Extension) settings.Serving { return c.Serving },
		run)
}

func run(ctx context.Context, cfg settings.Extension, restConfig *rest.Config) error {
	mgr, err := newManager(restConfig, cfg)
	if err != nil {
		return err
	}
	checker := etcd.NewChecker()
	defer checker.Close()
	srv, err := newServer(cfg, mgr, checker)
	if err != nil {
		return err
	}
	if err := mgr.Add(srv); err != nil {
		return fmt.Errorf("add extension server: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("server", srv.StartedChecker()); err != nil {
		return fmt.Errorf("readiness check: %w", err)
	}
	ctrl.Log.Info("starting", "port", cfg.Port)
	return mgr.Start(ctx)
}

func newManager(restConfig *rest.Config, cfg settings.Extension) (ctrl.Manager, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                program.Metrics(cfg.Serving),
		HealthProbeBindAddress: cfg.HealthAddr,
		PprofBindAddress:       cfg.ProfilerAddr,
		// Secrets are read one at a time when a gate asks; caching every
		// Secret of the management cluster would cost memory and access.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	return mgr, nil
}

// newServer is the Runtime SDK server with every hook: the topology hooks,
// called on every topology reconcile, read Gateways from the manager's
// cache; the lifecycle hooks read straight from the API server.
func newServer(cfg settings.Extension, mgr ctrl.Manager, checker *etcd.Checker) (*server.Server, error) {
	catalog := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(catalog); err != nil {
		return nil, fmt.Errorf("runtime hook catalog: %w", err)
	}
	srv, err := server.New(server.Options{Catalog: catalog, Port: cfg.Port, CertDir: cfg.CertDir})
	if err != nil {
		return nil, fmt.Errorf("extension server: %w", err)
	}
	lifecycle := &hooks.Handlers{Reader: mgr.GetAPIReader(), Etcd: checker}
	mutation := topology.NewHandlers(mgr.GetClient())
	mutation.MinBackupInterval = cfg.MinBackupInterval
	for _, h := range append(mutation.ExtensionHandlers(), lifecycle.ExtensionHandlers()...) {
		if err := srv.AddExtensionHandler(telemetry.TraceHook(h)); err != nil {
			return nil, fmt.Errorf("register hook %s: %w", h.Name, err)
		}
	}
	return srv, nil
}

// newScheme knows what the hooks read: Secrets and EndpointSlices,
// HostedControlPlanes and Gateways.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, gatewayv1.Install} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("scheme: %w", err)
		}
	}
	return scheme, nil
}
