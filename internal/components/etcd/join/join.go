package join

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// Member is what the wait needs of a starting member: etcd's --name and
// --data-dir, and ETCD_INITIAL_CLUSTER and ETCD_INITIAL_CLUSTER_STATE.
type Member struct {
	Name, DataDir                       string
	InitialCluster, InitialClusterState string
}

// Skip says why a member needs no wait: it founds a new cluster (its peers
// start beside it, and etcd waits for them itself) or has a data directory
// (etcd knows its cluster then, and retries its peers without exiting).
// It is empty when the member joins.
func Skip(m Member) (string, error) {
	if m.InitialClusterState != "existing" {
		return fmt.Sprintf("member %s founds a new cluster (initial cluster state %q)", m.Name, m.InitialClusterState), nil
	}
	entries, err := os.ReadDir(m.DataDir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read the data directory: %w", err)
	case len(entries) > 0:
		return fmt.Sprintf("member %s: data directory %s already holds data", m.Name, m.DataDir), nil
	}
	return "", nil
}

// Peers are the host:port addresses of the peer URLs of the initial
// cluster, the member's own left out.
func Peers(m Member) ([]string, error) {
	var peers []string
	for entry := range strings.SplitSeq(m.InitialCluster, ",") {
		name, raw, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok {
			return nil, fmt.Errorf("ETCD_INITIAL_CLUSTER: %q is not name=peer-url", entry)
		}
		if name == m.Name {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || u.Port() == "" {
			return nil, fmt.Errorf("ETCD_INITIAL_CLUSTER: the peer URL of %s is not a URL with a host and a port: %q", name, raw)
		}
		peers = append(peers, u.Host)
	}
	if len(peers) == 0 {
		return nil, fmt.Errorf("ETCD_INITIAL_CLUSTER names no member but %s", m.Name)
	}
	return peers, nil
}

// Dial connects to address, as etcd will; nil once it accepts.
type Dial func(ctx context.Context, address string) error

// TCP dials address over TCP within timeout and closes the connection.
func TCP(timeout time.Duration) Dial {
	d := &net.Dialer{Timeout: timeout}
	return func(ctx context.Context, address string) error {
		c, err := d.DialContext(ctx, "tcp", address)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// Wait tries the peers, one after the other, every interval, until one
// accepts, and returns it; or returns the last failure when ctx ends. told
// hears of each round that failed.
func Wait(ctx context.Context, peers []string, dial Dial, every time.Duration, told func(error)) (string, error) {
	for {
		var errs []error
		for _, p := range peers {
			err := dial(ctx, p)
			if err == nil {
				return p, nil
			}
			errs = append(errs, err)
		}
		err := errors.Join(errs...)
		told(err)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no peer reachable: %w", err)
		case <-time.After(every):
		}
	}
}
