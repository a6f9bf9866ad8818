package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd/join"
)

// waitFlag runs the command as the init container that lets a joining
// member start only once it reaches a peer (see package join).
const waitFlag = "--wait-for-peers"

// Within joinTimeout a joining member reaches a peer, or etcd starts anyway
// and says why it cannot join; each dial and the pause between rounds are
// short, so that etcd starts within a second of the network admitting the
// pod.
const (
	joinTimeout = 5 * time.Minute
	dialTimeout = time.Second
	joinEvery   = 500 * time.Millisecond
)

// waitForPeers is the command with waitFlag: args are etcd's --name and
// --data-dir, the initial cluster and its state come from env.
func waitForPeers(ctx context.Context, args []string, env func(string) string, out io.Writer, log *slog.Logger) int {
	fs := flag.NewFlagSet("etcd-restore "+waitFlag, flag.ContinueOnError)
	fs.SetOutput(out)
	m := join.Member{InitialCluster: env("ETCD_INITIAL_CLUSTER"), InitialClusterState: env("ETCD_INITIAL_CLUSTER_STATE")}
	fs.StringVar(&m.Name, "name", "", "etcd's --name")
	fs.StringVar(&m.DataDir, "data-dir", "", "etcd's --data-dir")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if m.Name == "" || m.DataDir == "" {
		fmt.Fprintln(out, "etcd-restore "+waitFlag+": --name and --data-dir are required")
		return 2
	}
	skip, err := join.Skip(m)
	if err != nil {
		log.Error("cannot tell whether the member joins", "member", m.Name, "error", err.Error())
		return 1
	}
	if skip != "" {
		log.Info("no peer to wait for: "+skip, "member", m.Name)
		return 0
	}
	peers, err := join.Peers(m)
	if err != nil {
		log.Error("no peers to join", "member", m.Name, "error", err.Error())
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	start := time.Now()
	peer, err := join.Wait(ctx, peers, join.TCP(dialTimeout), joinEvery, func(err error) {
		log.Info("no peer reachable yet", "member", m.Name, "error", err.Error())
	})
	if err != nil {
		// etcd starts and tells why it cannot join, as it would have.
		log.Error("starting etcd without a peer reached", "member", m.Name, "after", time.Since(start).String(), "error", err.Error())
		return 0
	}
	log.Info("reached a peer: etcd starts and joins", "member", m.Name, "peer", peer, "after", time.Since(start).String())
	return 0
}
