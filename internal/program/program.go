package program

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/logging"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/settings"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/telemetry"
)

// Main runs the binary called name: parse reads its settings, serving picks
// the shared ones out of them, and run does its work until ctx ends. Main
// does not return when run fails.
func Main[S any](name string, parse func() (S, error), serving func(S) settings.Serving,
	run func(ctx context.Context, cfg S, restConfig *rest.Config) error,
) {
	cfg, err := parse()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: bad configuration:\n%v\n", name, err)
		os.Exit(2)
	}
	common := serving(cfg)
	log, err := logging.New(common.LogFormat, common.LogLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	ctrl.SetLogger(log)
	if err := start(ctrl.SetupSignalHandler(), name, common, func(ctx context.Context, rc *rest.Config) error {
		return run(ctx, cfg, rc)
	}); err != nil {
		log.Error(err, name+" stopped")
		os.Exit(1)
	}
	log.Info(name + " stopped")
}

func start(ctx context.Context, name string, common settings.Serving, run func(context.Context, *rest.Config) error) error {
	rc, err := restConfig(common.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if err := telemetry.CountRequests(rc); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	stopTracing, err := telemetry.Setup(ctx, common.TracesEndpoint(), "hosted-control-plane-"+name, rc)
	if err != nil {
		return err
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stopTracing(flush)
	}()
	return run(ctx, rc)
}

// restConfig reaches the management cluster through the kubeconfig file
// given by --kubeconfig or, without one, where every controller-runtime
// manager looks: the files in KUBECONFIG, the pod's service account, then
// ~/.kube/config. Our flags live in a flag set of their own, so
// controller-runtime's --kubeconfig on the global one is never parsed.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return ctrl.GetConfig()
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kubeconfig, err)
	}
	if cfg.QPS == 0 {
		// As ctrl.GetConfig: the API server's priority and fairness limits
		// requests, not a client-side rate limiter.
		cfg.QPS = -1
	}
	return cfg, nil
}
