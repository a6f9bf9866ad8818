package join

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	url0    = "https://demo-etcd-0.demo-etcd-peer.ns.svc:2380"
	url1    = "https://demo-etcd-1.demo-etcd-peer.ns.svc:2380"
	url2    = "https://demo-etcd-2.demo-etcd-peer.ns.svc:2380"
	url3    = "https://demo-etcd-3.demo-etcd-peer.ns.svc:2380"
	cluster = "demo-etcd-2=" + url2 + ",demo-etcd-0=" + url0 + ",demo-etcd-1=" + url1
)

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

// The peers are asked in etcd's order (sorted), the member's own URL left
// out; the members are compared as a sorted list.
func TestClusterOf(t *testing.T) {
	c, err := ClusterOf(Member{Name: "demo-etcd-2", InitialCluster: cluster})
	require.NoError(t, err)
	assert.Equal(t, Cluster{Peers: []string{url0, url1}, URLs: []string{url0, url1, url2}}, c)

	_, err = ClusterOf(Member{Name: "demo-etcd-0", InitialCluster: "demo-etcd-0=" + url0})
	require.EqualError(t, err, "ETCD_INITIAL_CLUSTER names no member but demo-etcd-0")
	_, err = ClusterOf(Member{Name: "demo-etcd-1", InitialCluster: "demo-etcd-0=demo-etcd-0:2380"})
	require.EqualError(t, err, `ETCD_INITIAL_CLUSTER: the peer URL of demo-etcd-0 is not a URL with a host and a port: "demo-etcd-0:2380"`)
}

// A joining member waits until the first peer that answers lists exactly
// the members it read, itself among them; it ends with ErrStale when the
// peers list it among other members than it read (read before the member
// was added), which only a new start reads anew.
func TestWait(t *testing.T) {
	c, err := ClusterOf(Member{Name: "demo-etcd-2", InitialCluster: cluster})
	require.NoError(t, err)
	self := []string{url2}
	refused := errors.New("connection reset")
	answers := map[string][][]string{
		url0: {nil, nil, {url0, url1}, {url0, url1, url2}},
		url1: {{url0, url1}, {url0, url1}, {url0, url1}, {url0, url1}},
	}
	var asked []string
	ask := func(_ context.Context, peer string) ([]string, error) {
		asked = append(asked, peer)
		next := answers[peer][0]
		answers[peer] = answers[peer][1:]
		if next == nil {
			return nil, refused
		}
		return next, nil
	}
	var told []string
	got, err := Wait(t.Context(), c, self, ask, time.Millisecond, func(peer string, err error) { told = append(told, peer+": "+err.Error()) })
	require.NoError(t, err)
	assert.Equal(t, url0, got)
	assert.Equal(t, []string{url0, url1, url0, url1, url0, url0}, asked, "the first peer that answers decides, as for etcd")
	assert.Equal(t, []string{
		url0 + ": connection reset", url1 + ": " + ErrNotListed.Error(),
		url0 + ": connection reset", url1 + ": " + ErrNotListed.Error(),
		url0 + ": " + ErrNotListed.Error(),
	}, told)

	stale, err := ClusterOf(Member{Name: "demo-etcd-2", InitialCluster: "demo-etcd-0=" + url0 + ",demo-etcd-1=" + url1})
	require.NoError(t, err)
	listsIt := func(context.Context, string) ([]string, error) { return []string{url0, url1, url2}, nil }
	got, err = Wait(t.Context(), stale, self, listsIt, time.Millisecond, func(string, error) {})
	require.ErrorIs(t, err, ErrStale)
	assert.Equal(t, url0, got)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	never := func(context.Context, string) ([]string, error) { return nil, refused }
	_, err = Wait(ctx, c, self, never, time.Millisecond, func(string, error) {})
	require.EqualError(t, err, "no peer let the member join: connection reset")
}

// Members asks as etcd does, presenting the member's peer certificate on a
// new connection each time: while the peer closes connections after the
// handshake (as etcd does from an address that none of the certificate's
// DNS names resolves to yet) the ask fails, and then answers the members.
func TestMembers(t *testing.T) {
	dir := t.TempDir()
	files, serving := certificates(t, dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := &gate{Listener: l, config: &tls.Config{
		Certificates: []tls.Certificate{serving}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool(t, files.CA), MinVersion: tls.VersionTLS12,
	}}
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/version" {
			_, _ = w.Write([]byte(`{"etcdserver":"3.6.8","etcdcluster":"3.6.0"}`))
			return
		}
		if r.URL.Path != "/members" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("X-Etcd-Cluster-ID", "cdf818194e3a8c32")
		// demo-etcd-3 founded the cluster and never started: listed with the
		// initial cluster's name, without client URLs.
		_, _ = w.Write([]byte(`[{"id":1,"peerURLs":["` + url1 + `"],"name":"demo-etcd-1","clientURLs":["https://demo-etcd-1:2379"]},` +
			`{"id":2,"peerURLs":["` + url0 + `"],"name":"demo-etcd-0","clientURLs":["https://demo-etcd-0:2379"]},` +
			`{"id":3,"peerURLs":["` + url2 + `"],"isLearner":true},{"id":4,"peerURLs":["` + url3 + `"],"name":"demo-etcd-3"}]`))
	})}
	go func() { _ = srv.Serve(g) }()
	defer func() { _ = srv.Close() }()
	peer := "https://" + l.Addr().String()

	peers, err := NewPeers(files, time.Second)
	require.NoError(t, err)
	_, err = peers.Members(t.Context(), peer)
	require.Error(t, err, "closed after the handshake")
	require.Error(t, peers.Serves(t.Context(), peer), "closed after the handshake")
	g.admitted.Store(true)
	urls, err := peers.Members(t.Context(), peer)
	require.NoError(t, err)
	assert.Equal(t, []string{url0, url1, url2, url3}, urls)
	assert.Equal(t, int32(3), g.handshakes.Load(), "each ask a new connection with the member's certificate")
	starting, err := peers.Starting(t.Context(), peer)
	require.NoError(t, err)
	assert.Equal(t, []string{url2}, starting, "the learner that has published no name has not started")
	voters, err := peers.Voters(t.Context(), peer)
	require.NoError(t, err)
	assert.Equal(t, []string{url0, url1}, voters, "the voters that have run, not the learner, nor the founder that never started")
	assert.True(t, LostData(voters, []string{url1}), "a voter that has run, starting with an empty data directory")
	assert.False(t, LostData(voters, []string{url2}), "a learner just added joins")
	assert.False(t, LostData(voters, []string{url3}), "a founder that never started joins")
	require.NoError(t, peers.Serves(t.Context(), peer))

	_, err = peers.Members(t.Context(), peer+"/nothing")
	require.ErrorIs(t, err, ErrAnswer)
	assert.EqualError(t, err, "the answer is no cluster: 404 Not Found, not a member list")
	require.EqualError(t, peers.Serves(t.Context(), peer+"/nothing"), "GET /version: 404 Not Found")

	_, err = NewPeers(TLSFiles{Cert: files.Cert, Key: files.Key, CA: files.Key}, time.Second)
	require.EqualError(t, err, "the peer CA file holds no PEM certificate")
}

// gate handshakes each connection and hands it on only once admitted,
// closing it after the handshake before, as etcd's peer listener does when
// its SAN check fails.
type gate struct {
	net.Listener
	config     *tls.Config
	admitted   atomic.Bool
	handshakes atomic.Int32
}

func (g *gate) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		t := tls.Server(c, g.config)
		if err := t.Handshake(); err != nil || len(t.ConnectionState().PeerCertificates) == 0 {
			_ = c.Close()
			continue
		}
		g.handshakes.Add(1)
		if g.admitted.Load() {
			return t, nil
		}
		_ = t.Close()
	}
}

func pool(t *testing.T, file string) *x509.CertPool {
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	p := x509.NewCertPool()
	require.True(t, p.AppendCertsFromPEM(b))
	return p
}

// certificates writes a CA and a member's peer certificate (serving and
// client) signed by it into dir.
func certificates(t *testing.T, dir string) (TLSFiles, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcd-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "etcd-peer"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	files := TLSFiles{Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key"), CA: filepath.Join(dir, "ca.crt")}
	for file, block := range map[string]*pem.Block{
		files.Cert: {Type: "CERTIFICATE", Bytes: leafDER}, files.Key: {Type: "EC PRIVATE KEY", Bytes: keyDER}, files.CA: {Type: "CERTIFICATE", Bytes: caDER},
	} {
		require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(block), 0o600))
	}
	serving, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	require.NoError(t, err)
	return files, serving
}

// Members added together start one after the other: each waits for those
// whose peer URL sorts before its own, and none for itself or those after.
func TestBefore(t *testing.T) {
	starting := []string{url1, url2}
	assert.Empty(t, Before(starting, []string{url1}), "the first of them waits for none")
	assert.Equal(t, []string{url1}, Before(starting, []string{url2}))
	assert.Empty(t, Before(nil, []string{url2}), "nothing starts beside it")
	assert.Equal(t, []string{url1, url2}, Before(starting, []string{url2 + "0"}))
}

// WaitServing returns once every peer serves, asking again those that did
// not, and says which do not when its time is up.
func TestWaitServing(t *testing.T) {
	down := errors.New("connection refused")
	answers := map[string][]error{url0: {down, nil}, url1: {nil}}
	var asked, told []string
	serves := func(_ context.Context, peer string) error {
		asked = append(asked, peer)
		next := answers[peer][0]
		answers[peer] = answers[peer][1:]
		return next
	}
	require.NoError(t, WaitServing(t.Context(), []string{url0, url1}, serves, time.Millisecond, func(peer string, err error) { told = append(told, peer+": "+err.Error()) }))
	assert.Equal(t, []string{url0, url1, url0}, asked, "a peer that serves is not asked again")
	assert.Equal(t, []string{url0 + ": connection refused"}, told)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	err := WaitServing(ctx, []string{url1}, func(context.Context, string) error { return down }, time.Millisecond, func(string, error) {})
	require.EqualError(t, err, url1+" does not serve yet: connection refused")
}
