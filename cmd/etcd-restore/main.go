package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd/restore"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

func main() { os.Exit(run()) }

func run() int {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == waitFlag {
		return waitForPeers(ctx, os.Args[2:], os.Getenv, os.Stderr, log)
	}
	m, err := parse(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd-restore:", err)
		return 2
	}
	skip, err := restore.Skip(m)
	if err == nil && skip != "" {
		log.Info("nothing to restore: "+skip, "member", m.Name)
		return 0
	}
	var done restore.Restored
	if err == nil {
		done, err = restore.Restore(ctx, m)
	}
	if err != nil {
		log.Error("restore failed", "member", m.Name, "key", m.Key, "error", err.Error())
		return 1
	}
	log.Info(fmt.Sprintf("restored %s (%d bytes, revision %d, bumped by %d) as member %s", done.Key, done.Size, done.Revision, contract.EtcdRevisionBump, m.Name),
		"member", m.Name, "key", done.Key, "size", done.Size, "revision", done.Revision, "dataDir", m.DataDir)
	return 0
}

// parse reads etcd's flags from args and the rest from env.
func parse(args []string, env func(string) string, out io.Writer) (restore.Member, error) {
	fs := flag.NewFlagSet("etcd-restore", flag.ContinueOnError)
	fs.SetOutput(out)
	var m restore.Member
	fs.StringVar(&m.DataDir, "data-dir", "", "etcd's --data-dir")
	fs.StringVar(&m.Name, "name", "", "etcd's --name")
	fs.StringVar(&m.PeerURLs, "initial-advertise-peer-urls", "", "etcd's --initial-advertise-peer-urls")
	fs.StringVar(&m.InitialClusterToken, "initial-cluster-token", "", "etcd's --initial-cluster-token")
	if err := fs.Parse(args); err != nil {
		return m, err
	}
	m.InitialCluster, m.InitialClusterState = env("ETCD_INITIAL_CLUSTER"), env("ETCD_INITIAL_CLUSTER_STATE")
	m.Key, m.URL, m.CA = env(contract.EtcdRestoreKeyKey), env(contract.EtcdRestoreURLKey), []byte(env(contract.EtcdRestoreCAKey))
	m.ID = env(contract.EtcdRestoreIDKey)
	var missing []string
	for name, v := range map[string]string{
		"--data-dir": m.DataDir, "--name": m.Name, "--initial-advertise-peer-urls": m.PeerURLs, "--initial-cluster-token": m.InitialClusterToken,
		"ETCD_INITIAL_CLUSTER": m.InitialCluster, "ETCD_INITIAL_CLUSTER_STATE": m.InitialClusterState,
		contract.EtcdRestoreKeyKey: m.Key, contract.EtcdRestoreURLKey: m.URL,
	} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return m, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	return m, nil
}
