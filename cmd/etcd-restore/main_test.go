package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd/restore"
)

// The init container reads etcd's flags as the pod gives them, and the
// membership and snapshot from its environment.
func TestParse(t *testing.T) {
	env := map[string]string{
		"ETCD_INITIAL_CLUSTER": "demo-etcd-0=https://demo-etcd-0.demo-etcd-peer.ns.svc:2380", "ETCD_INITIAL_CLUSTER_STATE": "new",
		"RESTORE_KEY": "ns/demo/20260102T030405.000Z-rev5.db", "RESTORE_URL": "https://s3.example.com/b/k?X-Amz-Signature=x", "RESTORE_CA": "PEM",
	}
	m, err := parse([]string{
		"--data-dir=/var/lib/etcd/data", "--initial-advertise-peer-urls=https://demo-etcd-0.demo-etcd-peer.ns.svc:2380",
		"--initial-cluster-token=ns-demo-etcd", "--name=demo-etcd-0",
	}, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, restore.Member{
		DataDir: "/var/lib/etcd/data", Name: "demo-etcd-0", PeerURLs: "https://demo-etcd-0.demo-etcd-peer.ns.svc:2380",
		InitialCluster: env["ETCD_INITIAL_CLUSTER"], InitialClusterState: "new", InitialClusterToken: "ns-demo-etcd",
		Key: env["RESTORE_KEY"], URL: env["RESTORE_URL"], CA: []byte("PEM"),
	}, m)

	_, err = parse([]string{"--name=demo-etcd-0"}, func(k string) string { return env[k] }, io.Discard)
	require.EqualError(t, err, "missing --data-dir, --initial-advertise-peer-urls, --initial-cluster-token")
}
