package main

import (
	"context"
	"fmt"
	"os"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/backup"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/controller"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/program"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/settings"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/webhooks"
)

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

func main() {
	program.Main("controller",
		func() (settings.Controller, error) {
			return settings.ParseController(os.Args[1:], os.Getenv, os.Stdout)
		},
		func(c settings.Controller) settings.Serving { return c.Serving },
		run)
}

func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, clusterv1.AddToScheme, v1alpha1.AddToScheme, cmv1.AddToScheme, gatewayv1.Install, gatewayv1beta1.Install,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

func run(ctx context.Context, cfg settings.Controller, restConfig *rest.Config) error {
	scheme, err := newScheme()
	if err != nil {
		return fmt.Errorf("scheme: %w", err)
	}
	shard := controller.Shard{WatchFilter: cfg.WatchFilter, Namespaces: cfg.Namespaces}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       program.Metrics(cfg.Serving),
		HealthProbeBindAddress:        cfg.HealthAddr,
		PprofBindAddress:              cfg.ProfilerAddr,
		LeaderElection:                cfg.LeaderElection,
		LeaderElectionID:              cfg.LeaderElectionID(),
		LeaderElectionNamespace:       cfg.Namespace,
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhook.NewServer(webhook.Options{Port: cfg.Port, CertDir: cfg.CertDir}),
		Controller:                    config.Controller{MaxConcurrentReconciles: cfg.MaxConcurrentReconciles},
		Cache:                         controller.CacheOptions(shard),
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	rendering := render.DefaultSettings()
	rendering.ControllerNamespace = cfg.Namespace
	rendering.TunnelImage = cfg.TunnelImage
	rendering.EtcdRestoreImage = cfg.EtcdRestoreImage
	if rendering.ManagementAPIServer, err = controller.ManagementAPIServer(ctx, mgr.GetAPIReader()); err != nil {
		return err
	}
	clusters, err := controller.SetupClusterCache(ctx, mgr, mgr.GetClient(), shard, cfg.MaxConcurrentReconciles, cfg.WorkloadHealthProbeInterval)
	if err != nil {
		return fmt.Errorf("cluster cache: %w", err)
	}
	reconciler := controller.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), rendering, cfg.AllowedImageRegistries,
		mgr.GetEventRecorder("hosted-control-plane-controller"), controller.ReadyzProber{Timeout: 5 * time.Second}, clusters)
	reconciler.SetMustRollInterval(cfg.MustRollInterval)
	if err := reconciler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("HostedControlPlane controller: %w", err)
	}
	checker := reconciler.EtcdClients()
	defer checker.Close()
	backups := backup.DefaultOptions()
	backups.MaxConcurrent = cfg.MaxConcurrentBackups
	backups.MinInterval = cfg.MinBackupInterval
	if err := backup.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), checker,
		mgr.GetEventRecorder("hosted-control-plane-controller"), backups).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("etcd backup controller: %w", err)
	}
	ready := healthz.Ping
	if cfg.EnableWebhooks {
		if err := (webhooks.HostedControlPlane{MinBackupInterval: cfg.MinBackupInterval, AllowedRegistries: cfg.AllowedImageRegistries}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("HostedControlPlane webhooks: %w", err)
		}
		if err := (webhooks.HostedControlPlaneTemplate{MinBackupInterval: cfg.MinBackupInterval, AllowedRegistries: cfg.AllowedImageRegistries}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("HostedControlPlaneTemplate webhook: %w", err)
		}
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ready", ready); err != nil {
		return fmt.Errorf("readiness check: %w", err)
	}
	ctrl.Log.Info("starting", "webhooks", cfg.EnableWebhooks, "leaderElection", cfg.LeaderElection,
		"maxConcurrentReconciles", cfg.MaxConcurrentReconciles, "maxConcurrentBackups", cfg.MaxConcurrentBackups, "minBackupInterval", cfg.MinBackupInterval, "mustRollInterval", cfg.MustRollInterval,
		"workloadHealthProbeInterval", cfg.WorkloadHealthProbeInterval,
		"release", contract.Release,
		"allowedImageRegistries", cfg.AllowedImageRegistries.String())
	return mgr.Start(ctx)
}
