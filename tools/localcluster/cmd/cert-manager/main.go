package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hostedcp/cluster-api-provider-hosted/test/certmanager"
)

type options struct {
	kubeconfig, healthAddr, logFormat string
	leaderElect                       bool
	leaderElectionNamespace           string
}

// leaseName is the Lease the replicas elect their leader with.
const leaseName = "hostedcp-cert-manager"

func main() {
	var o options
	// Not flag.CommandLine: controller-runtime registers --kubeconfig there.
	flags := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	flags.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster; empty: the pod's service account")
	flags.StringVar(&o.healthAddr, "health-addr", ":9403", "address of the /healthz endpoint; 0 turns it off")
	flags.StringVar(&o.logFormat, "log-format", "json", "json or text")
	flags.BoolVar(&o.leaderElect, "leader-elect", false, "run only while holding the Lease "+leaseName)
	flags.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", certmanager.Namespace, "namespace of the Lease")
	_ = flags.Parse(os.Args[1:]) // ExitOnError
	log, err := newLogger(o.logFormat)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := run(o, log); err != nil {
		log.Error(err, "cert-manager stopped")
		os.Exit(1)
	}
}

// newLogger is the logger of every part: cert-manager's controllers (through
// klog and their contexts), controller-runtime and client-go.
func newLogger(format string) (logr.Logger, error) {
	cfg := zap.NewProductionConfig()
	switch format {
	case "json":
	case "text":
		cfg.Encoding = "console"
	default:
		return logr.Logger{}, fmt.Errorf("--log-format %q: want json or text", format)
	}
	z, err := cfg.Build()
	if err != nil {
		return logr.Logger{}, err
	}
	log := zapr.NewLogger(z)
	klog.SetLogger(log)
	ctrl.SetLogger(log)
	return log, nil
}

func run(o options, log logr.Logger) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	ctx = logf.NewContext(ctx, log)
	group, ctx := errgroup.WithContext(ctx)
	watchdog := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	if o.healthAddr != "0" {
		group.Go(func() error { return serveHealth(ctx, o.healthAddr, watchdog) })
	}
	group.Go(func() error {
		if !o.leaderElect {
			return runAll(ctx, cfg, o.kubeconfig)
		}
		return runElected(ctx, cfg, o, watchdog)
	})
	return group.Wait()
}

// runElected runs everything while this process holds the Lease, with
// cert-manager's default timings, and fails once it loses it.
func runElected(ctx context.Context, cfg *rest.Config, o options, watchdog *leaderelection.HealthzAdaptor) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	id, err := os.Hostname()
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.leaderElectionNamespace, leaseName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	leading := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 60 * time.Second, RenewDeadline: 40 * time.Second, RetryPeriod: 15 * time.Second,
		ReleaseOnCancel: true, Name: leaseName, WatchDog: watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(leading) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return err
	}
	// Run returns when ctx ends or the Lease is lost; either ends the run.
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		elector.Run(ctx)
		cancel()
	}()
	select {
	case <-ctx.Done():
		<-elected
		return nil
	case <-leading:
	}
	err = runAll(ctx, cfg, o.kubeconfig)
	cancel()
	<-elected
	if err == nil && parent.Err() == nil {
		err = errors.New("lost the Lease " + leaseName)
	}
	return err
}

// runAll runs cert-manager's controllers and its cainjector until ctx ends.
func runAll(ctx context.Context, cfg *rest.Config, kubeconfig string) error {
	group, ctx := errgroup.WithContext(ctx)
	controllers, err := certmanager.NewControllers(ctx, kubeconfig)
	if err != nil {
		return err
	}
	defer controllers.Shutdown()
	injector, err := certmanager.NewCAInjector(ctx, cfg, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	group.Go(func() error { return injector.Start(ctx) })
	if err := controllers.Start(ctx, group); err != nil {
		group.Go(func() error { return err })
	} else {
		logr.FromContextOrDiscard(ctx).Info("cert-manager controllers and cainjector running")
	}
	return group.Wait()
}

// serveHealth answers GET /healthz with 200 while leader election (if on)
// renews its Lease in time, until ctx ends.
func serveHealth(ctx context.Context, addr string, watchdog *leaderelection.HealthzAdaptor) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := watchdog.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	srv := &http.Server{
		Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
