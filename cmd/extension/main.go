package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/logging"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/settings"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/telemetry"
)

func main() {
	cfg, err := settings.ParseExtension(os.Args[1:], os.Getenv, os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "extension: bad configuration:\n%v\n", err)
		os.Exit(2)
	}
	log, err := logging.New(cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "extension: %v\n", err)
		os.Exit(2)
	}
	ctrl.SetLogger(log)
	if err := run(ctrl.SetupSignalHandler(), cfg); err != nil {
		log.Error(err, "extension stopped")
		os.Exit(1)
	}
	log.Info("extension stopped")
}

func run(ctx context.Context, cfg settings.Extension) error {
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	stopTracing, err := telemetry.Setup(ctx, cfg.OTLPEndpoint, "hosted-control-plane-extension", restConfig)
	if err != nil {
		return err
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stopTracing(flush)
	}()

	catalog := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(catalog); err != nil {
		return fmt.Errorf("runtime hook catalog: %w", err)
	}
	srv, err := server.New(server.Options{Catalog: catalog, Port: cfg.Port, CertDir: cfg.CertDir})
	if err != nil {
		return fmt.Errorf("extension server: %w", err)
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: cfg.MetricsAddr},
		HealthProbeBindAddress: cfg.HealthAddr,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
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
