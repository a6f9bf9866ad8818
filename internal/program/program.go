package program

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
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
	memoryLimit(log)
	if err := start(ctrl.SetupSignalHandler(), name, common, func(ctx context.Context, rc *rest.Config) error {
		return run(ctx, cfg, rc)
	}); err != nil {
		log.Error(err, name+" stopped")
		os.Exit(1)
	}
	log.Info(name + " stopped")
}

// memoryLimit sets the Go runtime's soft memory limit (GOMEMLIMIT) to nine
// tenths of the container's memory limit, read from its cgroup, so that
// the garbage collector works harder as the heap nears the limit, rather
// than the heap growing by GOGC's whole margin and the container being
// killed at the limit. GOMEMLIMIT set in the environment is kept; without
// a limit nothing changes. It logs the limit taken.
func memoryLimit(log logr.Logger) {
	limit, err := memlimit.Set(memlimit.WithRatio(0.9))
	switch {
	case err != nil:
		log.Error(err, "GOMEMLIMIT not set from the container's memory limit")
	case limit == math.MaxInt64:
		log.Info("memory limit: none")
	default:
		log.Info("memory limit", "GOMEMLIMIT", limit)
	}
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
