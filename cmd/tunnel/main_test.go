package main

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hostedcp/cluster-api-provider-hosted/test/pkitest"
)

func TestParse(t *testing.T) {
	const upstream = "--upstream=kas-tunnel.a.ns.example.test:443"
	for _, tc := range []struct {
		args   []string
		want   command
		failed string
	}{
		{
			args: []string{"server", "--cert-file=/tls/tls.crt", "--key-file=/tls/tls.key"},
			want: serverCommand{listen: ":6444", healthListen: ":6445", certFile: "/tls/tls.crt", keyFile: "/tls/tls.key", upstream: "127.0.0.1:6443"},
		},
		{
			args: []string{"node", upstream},
			want: nodeCommand{
				address: netip.MustParseAddr("240.0.0.1"), port: 6443, device: "hcp-kas0",
				upstream: "kas-tunnel.a.ns.example.test:443", caFile: "/etc/kubernetes/pki/ca.crt", healthListen: "240.0.0.1:6480",
			},
		},
		{
			args: []string{"node", upstream, "--address=172.20.0.1", "--port=443", "--device=lo", "--ca-file=/ca.crt"},
			want: nodeCommand{
				address: netip.MustParseAddr("172.20.0.1"), port: 443, device: "lo",
				upstream: "kas-tunnel.a.ns.example.test:443", caFile: "/ca.crt", healthListen: "172.20.0.1:6480",
			},
		},
		{
			args: []string{"node", upstream, "--address=fd00::1", "--health-listen=:9000"},
			want: nodeCommand{
				address: netip.MustParseAddr("fd00::1"), port: 6443, device: "hcp-kas0",
				upstream: "kas-tunnel.a.ns.example.test:443", caFile: "/etc/kubernetes/pki/ca.crt", healthListen: ":9000",
			},
		},
		{
			args: []string{"keys", "--discovery-file=/d", "--keys-file=/k", "--cert-file=/c", "--key-file=/p"},
			want: keysCommand{listen: "127.0.0.1:6446", discoveryFile: "/d", keysFile: "/k", certFile: "/c", keyFile: "/p"},
		},
		{args: []string{"keys", "--discovery-file=/d"}, failed: "--discovery-file, --keys-file, --cert-file and --key-file are required"},
		{
			args: []string{"audit", "--target=/a.kubeconfig", "--target=/b.kubeconfig", "--timeout=5s"},
			want: auditCommand{listen: "127.0.0.1:6447", targets: []string{"/a.kubeconfig", "/b.kubeconfig"}, timeout: 5 * time.Second},
		},
		{args: []string{"audit"}, failed: "--target is required, once per webhook target"},
		{args: []string{"audit", "--target=/a", "--timeout=0s"}, failed: "--timeout 0s: want a positive duration"},
		{args: nil, failed: "name a command: server, node, keys or audit"},
		{args: []string{"proxy"}, failed: `unknown command "proxy"`},
		{args: []string{"server"}, failed: "--cert-file and --key-file are required"},
		{args: []string{"server", "--cert-file=a", "--key-file=b", "extra"}, failed: `unexpected arguments ["extra"]`},
		{args: []string{"node"}, failed: "--upstream is required"},
		{args: []string{"node", "--upstream=kas-tunnel.a.ns.example.test"}, failed: "missing port in address"},
		{args: []string{"node", "--upstream=:443"}, failed: "want host:port"},
		{args: []string{"node", "--upstream=192.0.2.1:443"}, failed: "name the host, not its address"},
		{args: []string{"node", upstream, "--port=70000"}, failed: "--port 70000: want 1 to 65535"},
		{args: []string{"node", upstream, "--address=240.0.0"}, failed: "invalid value"},
	} {
		var out bytes.Buffer
		got, err := parse(tc.args, &out)
		if tc.failed != "" {
			assert.ErrorContains(t, err, tc.failed, "%v", tc.args)
			continue
		}
		if assert.NoError(t, err, "%v: %s", tc.args, &out) {
			assert.Equal(t, tc.want, got, "%v", tc.args)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"server", "-h"}, {"node", "--help"}} {
		var out bytes.Buffer
		_, err := parse(args, &out)
		assert.ErrorIs(t, err, flag.ErrHelp, "%v", args)
		assert.Contains(t, out.String(), "tunnel", "%v", args)
	}
}

// The server command serves TLS 1.3 and health on the addresses given, and
// stops when its context ends.
func TestServerCommandRuns(t *testing.T) {
	ca, err := pkitest.NewCA("cluster-ca")
	require.NoError(t, err)
	kp, err := ca.Issue("kas-tunnel", nil, "kas-tunnel.a.ns.example.test")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, kp.Write(dir, "tls"))
	cmd, err := parse([]string{
		"server", "--cert-file=" + filepath.Join(dir, "tls.crt"), "--key-file=" + filepath.Join(dir, "tls.key"),
		"--listen=127.0.0.1:0", "--health-listen=" + freeAddr(t), "--upstream=" + freeAddr(t),
	}, &bytes.Buffer{})
	require.NoError(t, err)
	health := cmd.(serverCommand).healthListen

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.run(ctx, slog.New(slog.DiscardHandler)) }()
	status := func(path string) int {
		resp, err := http.Get("http://" + health + path)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Eventually(t, func() bool { return status("/healthz") == http.StatusOK }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, http.StatusServiceUnavailable, status("/readyz"), "nothing listens at --upstream")
	cancel()
	require.NoError(t, <-done)
}

// freeAddr is an address on 127.0.0.1 nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
