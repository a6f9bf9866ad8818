package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd/join"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/netfail"
)

// waitFlag runs the command as the init container that lets a joining
// member start only once a peer would let it join (see package join).
const waitFlag = "--wait-for-peers"

// Within joinTimeout a peer lets a joining member join, or etcd starts
// anyway and says why it cannot; each request and the pause between rounds
// are short, so that etcd starts within a second of the cluster's DNS
// listing the pod. A peer's refusal is logged when it changes, and again
// every logEvery while it lasts.
// Members added together then start one after the other (see
// join.Before), each waiting at most beforeTimeout for those before it.
const (
	joinTimeout   = 5 * time.Minute
	askTimeout    = 2 * time.Second
	joinEvery     = 500 * time.Millisecond
	logEvery      = 10 * time.Second
	beforeTimeout = 30 * time.Second
)

// waitForPeers is the command with waitFlag: args are etcd's --name,
// --data-dir, --initial-advertise-peer-urls and peer TLS files; the initial
// cluster and its state come from env. It returns 1 only when the initial
// cluster read at start is stale, so that the kubelet starts the container
// again, which reads it anew, and join.ExitLostData when the member lost
// its data as a voter, so that etcd never starts on it.
func waitForPeers(ctx context.Context, args []string, env func(string) string, out io.Writer, log *slog.Logger) int {
	m, files, err := parseJoin(args, env, out)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(out, "etcd-restore "+waitFlag+":", err)
		}
		return 2
	}
	log = log.With("member", m.Name)
	skip, err := join.Skip(m)
	if err != nil {
		log.Error("cannot tell whether the member joins", "error", err.Error())
		return 1
	}
	if skip != "" {
		log.Info("no peer to wait for: " + skip)
		return 0
	}
	cluster, err := join.ClusterOf(m)
	if err != nil {
		log.Error("no cluster to join", "error", err.Error())
		return 1
	}
	peers, err := join.NewPeers(files, askTimeout)
	if err != nil {
		// etcd starts and tells why it cannot use its certificate.
		log.Error("starting etcd without asking a peer", "error", err.Error())
		return 0
	}
	log.Info("waiting until a peer answers GET /members, as etcd will ask it, over the peer TLS with this member's certificate, listing exactly the members of ETCD_INITIAL_CLUSTER",
		"peers", cluster.Peers, "members", cluster.URLs)
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	start := time.Now()
	self := strings.Split(m.PeerURLs, ",")
	peer, err := join.Wait(ctx, cluster, self, peers.Members, joinEvery, refusals(log, start, "the peer does not let the member join yet"))
	switch {
	case errors.Is(err, join.ErrStale):
		log.Error("the initial cluster read at start is stale: the container starts again to read it", "peer", peer, "after", time.Since(start).String())
		return 1
	case err != nil:
		// etcd starts and tells why it cannot join, as it would have.
		log.Error("starting etcd although no peer let it join", "after", time.Since(start).String(), "error", why(err))
		return 0
	}
	log.Info("a peer lets the member join", "peer", peer, "after", time.Since(start).String())
	if voters, err := peers.Voters(ctx, peer); err != nil {
		log.Info("cannot tell whether the member has run as a voter before; etcd starts", "error", why(err))
	} else if join.LostData(voters, self) {
		log.Error("the peer lists this member as a voter that has run, and its data directory is empty: its data is lost, and etcd must not start as that voter; the controller replaces the member", "peer", peer)
		return join.ExitLostData
	}
	waitBefore(ctx, log, peers, peer, self)
	log.Info("etcd starts", "after", time.Since(start).String())
	return 0
}

// waitBefore waits until the members that join beside this one and come
// before it (join.Before), as peer lists them, serve, so that they start
// one after the other; at most beforeTimeout, after which etcd starts
// anyway, as it did before the wait.
func waitBefore(ctx context.Context, log *slog.Logger, peers *join.Peers, peer string, self []string) {
	starting, err := peers.Starting(ctx, peer)
	if err != nil {
		log.Info("cannot tell which members start beside this one; etcd starts now", "error", why(err))
		return
	}
	before := join.Before(starting, self)
	if len(before) == 0 {
		return
	}
	log.Info("waiting until the members that join beside this one and come before it serve, so that they start one after the other", "members", before)
	ctx, cancel := context.WithTimeout(ctx, beforeTimeout)
	defer cancel()
	start := time.Now()
	if err := join.WaitServing(ctx, before, peers.Serves, joinEvery, refusals(log, start, "a member before it does not serve yet")); err != nil {
		log.Info("etcd starts although members before it do not serve yet", "after", time.Since(start).String(), "error", why(err))
		return
	}
	log.Info("the members before it serve", "after", time.Since(start).String())
}

// parseJoin reads etcd's flags from args and the membership from env.
func parseJoin(args []string, env func(string) string, out io.Writer) (join.Member, join.TLSFiles, error) {
	fs := flag.NewFlagSet("etcd-restore "+waitFlag, flag.ContinueOnError)
	fs.SetOutput(out)
	m := join.Member{InitialCluster: env("ETCD_INITIAL_CLUSTER"), InitialClusterState: env("ETCD_INITIAL_CLUSTER_STATE")}
	var files join.TLSFiles
	for name, v := range map[string]*string{
		"name": &m.Name, "data-dir": &m.DataDir, "initial-advertise-peer-urls": &m.PeerURLs,
		"peer-cert-file": &files.Cert, "peer-key-file": &files.Key, "peer-trusted-ca-file": &files.CA,
	} {
		fs.StringVar(v, name, "", "etcd's --"+name)
	}
	if err := fs.Parse(args); err != nil {
		return m, files, err
	}
	var missing []string
	fs.VisitAll(func(f *flag.Flag) {
		if f.Value.String() == "" {
			missing = append(missing, "--"+f.Name)
		}
	})
	if len(missing) > 0 {
		return m, files, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	return m, files, nil
}

// refusals logs msg with why a peer does not do what the member waits
// for (let it join, serve): each peer's reason when it changes, and again
// every logEvery while it lasts.
func refusals(log *slog.Logger, start time.Time, msg string) func(string, error) {
	type said struct {
		why string
		at  time.Time
	}
	last := map[string]said{}
	return func(peer string, err error) {
		w := why(err)
		if s, ok := last[peer]; ok && s.why == w && time.Since(s.at) < logEvery {
			return
		}
		last[peer] = said{w, time.Now()}
		log.Info(msg, "peer", peer, "why", w, "after", time.Since(start).String())
	}
}

// why says why a request failed in words that quote nothing of the
// certificates (a TLS error may quote their names); a peer that closes
// the connection after the handshake is the one etcd's SAN check refused.
func why(err error) string {
	if errors.Is(err, join.ErrNotListed) || errors.Is(err, join.ErrAnswer) {
		return err.Error()
	}
	w := cmp.Or(netfail.Describe(err), "the request failed")
	if w == "the connection was closed before an answer" {
		w += " (etcd closes a peer's connection from an address that no DNS name of its certificate resolves to yet)"
	}
	return w
}
