package restore

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

func member(dir, state string) Member {
	return Member{
		DataDir: filepath.Join(dir, "data"), Name: "demo-etcd-0", PeerURLs: "http://127.0.0.1:2380",
		InitialCluster: "demo-etcd-0=http://127.0.0.1:2380", InitialClusterState: state, InitialClusterToken: "ns-demo-etcd",
		Key: "ns/demo/20260102T030405.000Z-rev5.db",
	}
}

func TestSkip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state string
		setup func(dataDir string)
		want  string
	}{
		{"a founder on a new volume restores", "new", func(string) {}, ""},
		{"a founder on an empty data directory restores", "new", func(d string) { require.NoError(t, os.Mkdir(d, 0o700)) }, ""},
		{
			"a member that joins syncs from its peers", "existing", func(string) {},
			`member demo-etcd-0 joins an existing cluster (initial cluster state "existing") and syncs from its peers`,
		},
		{
			"a member with data keeps it", "new", func(d string) {
				require.NoError(t, os.MkdirAll(filepath.Join(d, "member", "snap"), 0o700))
			}, "member demo-etcd-0: data directory %s already holds data",
		},
		{"in place, a member with data restores", "new", func(d string) {
			require.NoError(t, os.MkdirAll(filepath.Join(d, "member", "snap"), 0o700))
		}, ""},
		{"in place, a member restored for an earlier restore restores", "new", func(d string) {
			require.NoError(t, os.MkdirAll(filepath.Join(d, "member", "snap"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(d), "restore-id"), []byte("20260101T000000Z"), 0o600))
		}, ""},
		{"in place, a member restored for this restore starts", "new", func(d string) {
			require.NoError(t, os.MkdirAll(filepath.Join(d, "member", "snap"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(d), "restore-id"), []byte("20261123T200000Z"), 0o600))
		}, "member demo-etcd-0 was restored for restore 20261123T200000Z already"},
		{
			"in place, a member that joins syncs from its peers", "existing", func(string) {},
			`member demo-etcd-0 joins an existing cluster (initial cluster state "existing") and syncs from its peers`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := member(t.TempDir(), tc.state)
			if strings.HasPrefix(tc.name, "in place") {
				m.ID = "20261123T200000Z"
			}
			tc.setup(m.DataDir)
			why, err := Skip(m)
			require.NoError(t, err)
			want := tc.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, m.DataDir)
			}
			assert.Equal(t, want, why)
		})
	}
}

// A restore that fails leaves no data directory behind, nor the download
// or the half-restored directory: the member tries again from scratch.
func TestFailedRestoreLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"the URL expired", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>", http.StatusForbidden)
		}, "download ns/demo/20260102T030405.000Z-rev5.db: the store answered 403 Forbidden (AccessDenied)"},
		{"not a snapshot", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write(make([]byte, 64<<10))
		}, "download ns/demo/20260102T030405.000Z-rev5.db: etcd snapshot is corrupt"},
		{"the stream breaks", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "1000000")
			_, _ = w.Write(make([]byte, 1000))
		}, "download ns/demo/20260102T030405.000Z-rev5.db: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			dir := t.TempDir()
			// What an earlier crash left.
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "restore-data.tmp", "member"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "restore-snapshot.db"), []byte("partial"), 0o600))
			m := member(dir, "new")
			m.URL = srv.URL
			_, err := Restore(context.Background(), m)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, entries)
		})
	}
}

// A restore in place whose snapshot cannot be had keeps the data the
// member holds.
func TestFailedRestoreInPlaceKeepsTheData(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(make([]byte, 64<<10)) }))
	defer srv.Close()
	m := member(t.TempDir(), "new")
	m.URL, m.ID = srv.URL, "20261123T200000Z"
	held := filepath.Join(m.DataDir, "member", "snap", "db")
	require.NoError(t, os.MkdirAll(filepath.Dir(held), 0o700))
	require.NoError(t, os.WriteFile(held, []byte("the member's data"), 0o600))
	_, err := Restore(context.Background(), m)
	require.ErrorContains(t, err, "etcd snapshot is corrupt")
	data, err := os.ReadFile(held)
	require.NoError(t, err)
	assert.Equal(t, "the member's data", string(data))
	assert.NoFileExists(t, filepath.Join(filepath.Dir(m.DataDir), "restore-id"))
}

// A restore in place replaces what a member of a real etcd holds with the
// snapshot: what was written after it is gone, what was deleted after it is
// back, and revisions move on past the ones the member had.
func TestRestoreInPlaceReplacesTheData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	peer := "http://" + freeAddress(t)
	m := Member{
		DataDir: filepath.Join(dir, "data"), Name: "demo-etcd-0", PeerURLs: peer,
		InitialCluster: "demo-etcd-0=" + peer, InitialClusterState: "new", InitialClusterToken: "ns-demo-etcd",
		Key: "ns/demo/20260102T030405.000Z-rev5.db", ID: "20261123T200000Z",
	}
	running := startEtcdOn(t, m.DataDir, m.Name, peer)
	cli := client(t, running)
	for i := range 100 {
		_, err := cli.Put(ctx, fmt.Sprintf("/registry/configmaps/default/cm-%d", i), fmt.Sprintf("value %d", i))
		require.NoError(t, err)
	}
	snap, err := cli.Snapshot(ctx)
	require.NoError(t, err)
	data, err := io.ReadAll(snap)
	require.NoError(t, err)
	_, err = cli.Put(ctx, "/registry/configmaps/default/written-after", "after")
	require.NoError(t, err)
	_, err = cli.Delete(ctx, "/registry/configmaps/default/cm-7")
	require.NoError(t, err)
	last, err := cli.Get(ctx, "/registry/configmaps/default/written-after")
	require.NoError(t, err)
	running.Close()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(data) }))
	defer srv.Close()
	m.URL = srv.URL
	why, err := Skip(m)
	require.NoError(t, err)
	require.Empty(t, why, "a member with data restores in place")
	_, err = Restore(ctx, m)
	require.NoError(t, err)
	why, err = Skip(m)
	require.NoError(t, err)
	assert.Equal(t, "member demo-etcd-0 was restored for restore 20261123T200000Z already", why)

	got, err := client(t, startEtcdOn(t, m.DataDir, m.Name, peer)).Get(ctx, "/registry/configmaps/", clientv3.WithPrefix())
	require.NoError(t, err)
	assert.Len(t, got.Kvs, 100)
	assert.Equal(t, "value 7", string(valueOf(got, "/registry/configmaps/default/cm-7")), "deleted after the snapshot, back")
	assert.Nil(t, valueOf(got, "/registry/configmaps/default/written-after"), "written after the snapshot, gone")
	assert.Greater(t, got.Header.Revision, last.Header.Revision, "revisions never go backwards")
}

// A snapshot of a real etcd, restored, starts an etcd with every key, at a
// revision beyond the snapshot's.
func TestRestoreStartsEtcdFromTheSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	source := startEtcd(t, t.TempDir(), "source", embed.ClusterStateFlagNew)
	cli := client(t, source)
	for i := range 100 {
		_, err := cli.Put(ctx, fmt.Sprintf("/registry/configmaps/default/cm-%d", i), fmt.Sprintf("value %d", i))
		require.NoError(t, err)
	}
	resp, err := cli.Get(ctx, "/registry/configmaps/default/cm-99")
	require.NoError(t, err)
	revision := resp.Header.Revision
	snap, err := cli.Snapshot(ctx)
	require.NoError(t, err)
	data, err := io.ReadAll(snap)
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(data) }))
	defer srv.Close()

	dir := t.TempDir()
	peer := "http://" + freeAddress(t)
	m := Member{
		DataDir: filepath.Join(dir, "data"), Name: "demo-etcd-0", PeerURLs: peer,
		InitialCluster: "demo-etcd-0=" + peer, InitialClusterState: "new", InitialClusterToken: "ns-demo-etcd",
		Key: "ns/demo/20260102T030405.000Z-rev5.db", URL: srv.URL,
	}
	restored, err := Restore(ctx, m)
	require.NoError(t, err)
	assert.Equal(t, Restored{Key: m.Key, Size: int64(len(data)), Revision: revision}, restored)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the download and the work directory are gone")
	assert.Equal(t, "data", entries[0].Name())
	why, err := Skip(m)
	require.NoError(t, err)
	assert.NotEmpty(t, why, "a restored member does not restore again")

	e := startEtcdOn(t, m.DataDir, m.Name, peer)
	got, err := client(t, e).Get(ctx, "/registry/configmaps/", clientv3.WithPrefix())
	require.NoError(t, err)
	assert.Len(t, got.Kvs, 100)
	assert.Equal(t, "value 42", string(valueOf(got, "/registry/configmaps/default/cm-42")))
	assert.Greater(t, got.Header.Revision, revision+contract.EtcdRevisionBump-1)
}

func valueOf(resp *clientv3.GetResponse, key string) []byte {
	for _, kv := range resp.Kvs {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return nil
}

func startEtcd(t *testing.T, dir, name, state string) *embed.Etcd {
	t.Helper()
	return startEtcdWith(t, dir, name, "http://"+freeAddress(t), state)
}

func startEtcdOn(t *testing.T, dataDir, name, peer string) *embed.Etcd {
	t.Helper()
	return startEtcdWith(t, dataDir, name, peer, embed.ClusterStateFlagNew)
}

func startEtcdWith(t *testing.T, dataDir, name, peer, state string) *embed.Etcd {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir, cfg.Name, cfg.LogLevel = dataDir, name, "error"
	cfg.ClusterState = state
	client := mustURL(t, "http://"+freeAddress(t))
	peerURL := mustURL(t, peer)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = name + "=" + peer
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		select {
		case <-e.Server.StopNotify(): // closed by the test
		default:
			e.Close()
		}
	})
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd did not start")
	}
	return e
}

func client(t *testing.T, e *embed.Etcd) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Clients[0].Addr().String()}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func mustURL(t *testing.T, s string) url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return *u
}

func freeAddress(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close()
	return addr
}

// A member that cannot reach the store logs why, never the URL: its
// signature lets whoever reads the log download the snapshot.
func TestFailedDownloadDoesNotQuoteTheURL(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close() // nothing answers there now
	m := member(t.TempDir(), "new")
	m.URL = "http://" + addr + "/bucket/ns/demo/20260102T030405.000Z-rev5.db?X-Amz-Signature=plantedsignature"
	_, err := Restore(context.Background(), m)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the connection was refused")
	assert.NotContains(t, err.Error(), "plantedsignature")
	assert.NotContains(t, err.Error(), addr)
}
