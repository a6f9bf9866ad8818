package join

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const cluster = "demo-etcd-0=https://demo-etcd-0.demo-etcd-peer.ns.svc:2380," +
	"demo-etcd-1=https://demo-etcd-1.demo-etcd-peer.ns.svc:2380,demo-etcd-2=https://demo-etcd-2.demo-etcd-peer.ns.svc:2380"

// Only a member that joins with an empty data directory waits: a founder's
// peers start beside it, and a member with data knows its cluster.
func TestSkip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	joining := Member{Name: "demo-etcd-2", DataDir: dir, InitialCluster: cluster, InitialClusterState: "existing"}
	why, err := Skip(joining)
	require.NoError(t, err)
	assert.Empty(t, why, "no data directory yet")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	why, _ = Skip(joining)
	assert.Empty(t, why, "an empty data directory")

	founding := joining
	founding.InitialClusterState = "new"
	why, _ = Skip(founding)
	assert.Equal(t, `member demo-etcd-2 founds a new cluster (initial cluster state "new")`, why)

	require.NoError(t, os.MkdirAll(filepath.Join(dir, "member"), 0o700))
	why, _ = Skip(joining)
	assert.Equal(t, "member demo-etcd-2: data directory "+dir+" already holds data", why)
}

func TestPeers(t *testing.T) {
	peers, err := Peers(Member{Name: "demo-etcd-2", InitialCluster: cluster})
	require.NoError(t, err)
	assert.Equal(t, []string{"demo-etcd-0.demo-etcd-peer.ns.svc:2380", "demo-etcd-1.demo-etcd-peer.ns.svc:2380"}, peers)

	_, err = Peers(Member{Name: "demo-etcd-0", InitialCluster: "demo-etcd-0=https://demo-etcd-0.demo-etcd-peer.ns.svc:2380"})
	require.EqualError(t, err, "ETCD_INITIAL_CLUSTER names no member but demo-etcd-0")
	_, err = Peers(Member{Name: "demo-etcd-1", InitialCluster: "demo-etcd-0=demo-etcd-0:2380"})
	require.EqualError(t, err, `ETCD_INITIAL_CLUSTER: the peer URL of demo-etcd-0 is not a URL with a host and a port: "demo-etcd-0:2380"`)
}

// The wait ends once a peer accepts a connection (here a listener that
// opens after a few refused rounds, as a network policy admits a new pod
// after a few seconds), and gives up when its context ends.
func TestWaitUntilAPeerAccepts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	address := l.Addr().String()
	require.NoError(t, l.Close()) // refused for now

	rounds := 0
	told := func(error) {
		rounds++
		if rounds == 3 {
			l, err = net.Listen("tcp", address)
			require.NoError(t, err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got, err := Wait(ctx, []string{"127.0.0.1:1", address}, TCP(time.Second), 10*time.Millisecond, told)
	require.NoError(t, err)
	assert.Equal(t, address, got)
	assert.Equal(t, 3, rounds)
	require.NoError(t, l.Close())

	ctx, cancel = context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	refused := func(context.Context, string) error { return errors.New("refused") }
	_, err = Wait(ctx, []string{"demo-etcd-0:2380"}, refused, 10*time.Millisecond, func(error) {})
	require.EqualError(t, err, "no peer reachable: refused")
}
