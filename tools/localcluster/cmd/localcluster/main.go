package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/local"
)

const usage = `usage: localcluster up|down|serve [-dir DIR] [-gateway]

  up     build what is missing, start the local management cluster in the
         background, install the provider, create the sample hosted cluster
         (with -gateway, the one served through the Gateway capi/capi-system
         and its API server's name in /etc/hosts) and print the path of its
         kubeconfig
  down   stop the cluster and remove everything it started, and the
         /etc/hosts lines up added
  serve  run the cluster in the foreground until SIGTERM (up starts it)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", cluster.DefaultDir, "directory of the cluster's state and logs")
	config := fs.String("config", "", "serve: the cluster configuration up wrote")
	gateway := fs.Bool("gateway", false, "up: create the sample served through the Gateway (config/samples/hostedcontrolplane.yaml)")
	_ = fs.Parse(os.Args[2:])
	os.Exit(run(os.Args[1], *dir, *config, *gateway))
}

// run runs command and returns the process's exit code, once the signal
// handling it set up is undone.
func run(command, dir, config string, gateway bool) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch command {
	case "up":
		err = up(ctx, dir, gateway)
	case "down":
		err = down(dir)
	case "serve":
		err = serve(ctx, config)
	default:
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		return 1
	}
	return 0
}

func up(ctx context.Context, dir string, gateway bool) error {
	root, err := envtest.RepoRoot()
	if err != nil {
		return err
	}
	if err := cluster.CheckNoOtherCluster(dir); err != nil {
		return err
	}
	cfg, err := local.ClusterConfig(ctx, root, dir, os.Stdout)
	if err != nil {
		return err
	}
	serving, err := startServe(cfg)
	if err != nil {
		return err
	}
	c, err := waitServing(ctx, dir, serving)
	if err != nil {
		return err
	}
	fmt.Println("localcluster: installing cert-manager, Cluster API, Traefik with the Gateway capi/capi-system, and the provider")
	if err := local.Install(ctx, root, c, false); err != nil {
		return err
	}
	sample := filepath.Join(root, "config", "samples", "quickstart.yaml")
	if gateway {
		sample = filepath.Join(root, "config", "samples", "hostedcontrolplane.yaml")
	}
	fmt.Println("localcluster: creating the hosted cluster of", sample)
	kubeconfig, err := local.CreateSample(ctx, c, sample, dir)
	if err != nil {
		return err
	}
	if err := publishGatewayName(kubeconfig); err != nil {
		return err
	}
	fmt.Printf(`localcluster: the hosted cluster is Available.
  management cluster: export KUBECONFIG=%s
  hosted cluster:     export KUBECONFIG=%s
  tear down:          make down
%s
`, filepath.Join(dir, "kubeconfig"), kubeconfig, kubeconfig)
	return nil
}

// publishGatewayName adds the API server's name to /etc/hosts when the
// kubeconfig names one of the Gateway's domain: only the local cluster's
// DNS publishes it, and the host's resolver does not ask that one.
func publishGatewayName(kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return err
	}
	if !cluster.InGatewayDomain(u.Hostname()) {
		return nil
	}
	fmt.Printf("localcluster: %s added to %s (make down removes it)\n", u.Hostname(), local.HostsFile)
	return local.AddHosts(local.HostsFile, cluster.GatewayAddress, u.Hostname())
}

// startServe starts `localcluster serve` in its own session, so that it
// outlives up, with its output in the cluster's log directory.
func startServe(cfg cluster.Config) (*exec.Cmd, error) {
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "logs"), 0o700); err != nil {
		return nil, err
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(cfg.Dir, "logs", "config.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(cfg.Dir, "logs", "localcluster.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = log.Close() }()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "serve", "-config", file)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	fmt.Println("localcluster: starting the local management cluster; its log:", log.Name())
	return cmd, cmd.Start()
}

// waitServing waits until serve reports the cluster up (its ready file) and
// returns an admin client.
func waitServing(ctx context.Context, dir string, serving *exec.Cmd) (client.Client, error) {
	exited := make(chan error, 1)
	go func() { exited <- serving.Wait() }()
	for {
		if _, err := os.Stat(readyFile(dir)); err == nil {
			return cluster.Connect(dir)
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("the local cluster did not come up (%w); see %s", err, filepath.Join(dir, "logs"))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func readyFile(dir string) string { return filepath.Join(dir, "ready") }

// serve runs the cluster until SIGTERM or SIGINT, then tears it down.
func serve(ctx context.Context, config string) error {
	b, err := os.ReadFile(config)
	if err != nil {
		return err
	}
	var cfg cluster.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return err
	}
	cfg.Log = os.Stdout
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(readyFile(cfg.Dir), nil, 0o600); err != nil {
		return errors.Join(err, c.Stop())
	}
	<-ctx.Done()
	fmt.Println("localcluster: stopping")
	return c.Stop()
}

// down stops the background process, which tears the cluster down, and then
// removes whatever is left, also when that process died.
func down(dir string) error {
	root, err := envtest.RepoRoot()
	if err != nil {
		return err
	}
	pid, err := cluster.Supervisor(dir)
	if err != nil {
		return err
	}
	if pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		for deadline := time.Now().Add(2 * time.Minute); syscall.Kill(pid, 0) == nil && time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if err := cluster.Teardown(dir, images.HostBinaries(root)["kube-proxy"]); err != nil {
		return err
	}
	if err := local.RemoveHosts(local.HostsFile); err != nil {
		return err
	}
	fmt.Println("localcluster: torn down; logs kept in", filepath.Join(dir, "logs"))
	return nil
}
