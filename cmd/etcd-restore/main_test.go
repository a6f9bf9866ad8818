package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd/join"
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

// The wait reads who the member is and its peer certificate from etcd's
// flags, and refuses to run without any of them.
func TestParseJoin(t *testing.T) {
	env := map[string]string{"ETCD_INITIAL_CLUSTER": "demo-etcd-0=https://demo-etcd-0.demo-etcd-peer.ns.svc:2380", "ETCD_INITIAL_CLUSTER_STATE": "existing"}
	m, files, err := parseJoin([]string{
		"--data-dir=/var/lib/etcd/data", "--initial-advertise-peer-urls=https://demo-etcd-1.demo-etcd-peer.ns.svc:2380", "--name=demo-etcd-1",
		"--peer-cert-file=/p/tls.crt", "--peer-key-file=/p/tls.key", "--peer-trusted-ca-file=/p/ca.crt",
	}, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, join.Member{
		Name: "demo-etcd-1", DataDir: "/var/lib/etcd/data", PeerURLs: "https://demo-etcd-1.demo-etcd-peer.ns.svc:2380",
		InitialCluster: env["ETCD_INITIAL_CLUSTER"], InitialClusterState: "existing",
	}, m)
	assert.Equal(t, join.TLSFiles{Cert: "/p/tls.crt", Key: "/p/tls.key", CA: "/p/ca.crt"}, files)

	_, _, err = parseJoin([]string{"--name=demo-etcd-1", "--data-dir=/d"}, func(k string) string { return env[k] }, io.Discard)
	require.EqualError(t, err, "missing --initial-advertise-peer-urls, --peer-cert-file, --peer-key-file, --peer-trusted-ca-file")
}
