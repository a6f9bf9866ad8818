package tunnel

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hostedcp/cluster-api-provider-hosted/test/pkitest"
)

// tenantHost is the tenant's kas-tunnel name in these tests: the node dials
// upstream by name, and this is the name that resolves here.
const tenantHost = "localhost"

// apiServerName is the name pods give the API server.
const apiServerName = "kubernetes.default.svc"

// pki is a tenant's cluster CA and what it signs.
type pki struct {
	ca *pkitest.KeyPair
	// tunnel serves the sidecar, for tenantHost.
	tunnel *pkitest.KeyPair
	// apiServer serves the upstream, for apiServerName.
	apiServer *pkitest.KeyPair
	// pod is a pod's client certificate.
	pod *pkitest.KeyPair
}

func newPKI(t *testing.T) pki {
	t.Helper()
	ca := newCA(t, "cluster-ca")
	return pki{
		ca: ca, tunnel: issue(t, ca, "kas-tunnel", tenantHost), apiServer: issue(t, ca, "kube-apiserver", apiServerName),
		pod: issue(t, ca, "system:serviceaccount:kube-system:coredns"),
	}
}

func newCA(t *testing.T, name string) *pkitest.KeyPair {
	t.Helper()
	ca, err := pkitest.NewCA(name)
	require.NoError(t, err)
	return ca
}

func issue(t *testing.T, ca *pkitest.KeyPair, name string, hosts ...string) *pkitest.KeyPair {
	t.Helper()
	kp, err := ca.Issue(name, nil, hosts...)
	require.NoError(t, err)
	return kp
}

func (p pki) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	return pool
}

// podTLS is the TLS a pod speaks to kubernetes.default: its own, verifying
// the API server and presenting a client certificate.
func (p pki) podTLS(t *testing.T, nextProtos ...string) *tls.Config {
	t.Helper()
	key, err := p.pod.KeyPEM()
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(p.pod.CertPEM(), key)
	require.NoError(t, err)
	return &tls.Config{ServerName: apiServerName, RootCAs: p.pool(), Certificates: []tls.Certificate{cert}, NextProtos: nextProtos}
}

// writeFiles replaces name.crt and name.key in dir (or only the
// certificate) as the kubelet updates a mounted Secret: new files renamed
// into place.
func writeFiles(t *testing.T, dir, name string, kp *pkitest.KeyPair, certOnly bool) {
	t.Helper()
	files := map[string][]byte{name + ".crt": kp.CertPEM()}
	if !certOnly {
		key, err := kp.KeyPEM()
		require.NoError(t, err)
		files[name+".key"] = key
	}
	for file, data := range files {
		tmp := filepath.Join(dir, "."+file)
		require.NoError(t, os.WriteFile(tmp, data, 0o600))
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, file)))
	}
}

// logs collects an end's JSON log lines.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logs) logger() *slog.Logger { return slog.New(slog.NewJSONHandler(l, nil)) }

// waitFor waits until the log holds want.
func (l *logs) waitFor(t *testing.T, want string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(l.String(), want) }, 5*time.Second, 10*time.Millisecond,
		"log lacks %q:\n%s", want, l)
}

// serve runs e on a listener of its own on 127.0.0.1 until the test ends
// or stop is called; stop returns what Serve returned.
func serve(t *testing.T, e End) (addr string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx, ln) }()
	var once sync.Once
	var served error
	stop = func() error {
		once.Do(func() {
			cancel()
			served = <-done
		})
		return served
	}
	t.Cleanup(func() { assert.NoError(t, stop()) })
	return ln.Addr().String(), stop
}

// tunnel is a Server and a Node in front of upstream; clients connect to
// Node at addr.
type tunnel struct {
	addr                 string
	dir                  string
	node, server         *logs
	nodeEnd              *Node
	serverEnd            *Server
	serverAddr           string
	stopNode, stopServer func() error
}

// newTunnel starts a Server with the sidecar certificate served and a Node
// trusting the CA ca in front of upstream. Its ends drain for drain on
// shutdown.
func newTunnel(t *testing.T, upstream string, served, ca *pkitest.KeyPair, drain time.Duration) *tunnel {
	t.Helper()
	tn := &tunnel{dir: t.TempDir(), node: &logs{}, server: &logs{}}
	writeFiles(t, tn.dir, "tunnel", served, false)
	writeFiles(t, tn.dir, "ca", ca, true)
	var err error
	tn.serverEnd, err = NewServer(filepath.Join(tn.dir, "tunnel.crt"), filepath.Join(tn.dir, "tunnel.key"), upstream, tn.server.logger())
	require.NoError(t, err)
	tn.serverEnd.drain = drain
	tn.serverAddr, tn.stopServer = serve(t, tn.serverEnd)
	_, port, err := net.SplitHostPort(tn.serverAddr)
	require.NoError(t, err)
	tn.nodeEnd, err = NewNode(net.JoinHostPort(tenantHost, port), filepath.Join(tn.dir, "ca.crt"), false, tn.node.logger())
	require.NoError(t, err)
	tn.nodeEnd.drain = drain
	tn.addr, tn.stopNode = serve(t, tn.nodeEnd)
	return tn
}

// apiServer is an HTTPS upstream that requires a client certificate of the
// cluster CA and reports what it received.
func apiServer(t *testing.T, p pki) (addr string, streamNext chan struct{}) {
	t.Helper()
	streamNext = make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/whoami", func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "%s %s %s", r.Proto, r.TLS.PeerCertificates[0].Subject.CommonName, r.Header.Get("Authorization"))
	})
	// A watch: the second event only after the client read the first.
	mux.HandleFunc("/watch", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "event 1\n")
		w.(http.Flusher).Flush()
		<-streamNext
		_, _ = io.WriteString(w, "event 2\n")
	})
	// As exec does: switch protocols, then echo lines.
	mux.HandleFunc("/exec", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want Upgrade: echo", http.StatusBadRequest)
			return
		}
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = rw.Flush()
		for {
			line, err := rw.ReadString('\n')
			if err != nil {
				return
			}
			_, _ = rw.WriteString("echo " + line)
			_ = rw.Flush()
		}
	})
	key, err := p.apiServer.KeyPEM()
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(p.apiServer.CertPEM(), key)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.pool()}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), streamNext
}

// podClient is a pod's HTTP client. Its connections close when the test
// ends, before the tunnel's ends stop, which would otherwise wait for them.
func podClient(t *testing.T, p pki) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: p.podTLS(t), ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// tcpUpstream reads all a client sends, until the client half-closes, then
// answers with all of it and closes. It counts the connections it accepts.
func tcpUpstream(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	accepted = &atomic.Int32{}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer conn.Close()
				got, err := io.ReadAll(conn)
				if err == nil {
					_, _ = conn.Write(got)
				}
			}()
		}
	}()
	return ln.Addr().String(), accepted
}

// roundTrip sends payload through the tunnel at addr, half-closes and
// returns the answer, which tcpUpstream sends only after it saw the
// half-close.
func roundTrip(addr string, payload []byte) ([]byte, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := conn.Write(payload); err != nil {
		return nil, err
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		return nil, err
	}
	return io.ReadAll(conn)
}

// The pod's own TLS reaches the API server end to end: the pod verifies the
// API server's certificate, the API server sees the pod's client
// certificate and token, and they speak HTTP/2, which they agreed on by
// ALPN through the tunnel.
func TestTunnelCarriesThePodsTLS(t *testing.T) {
	p := newPKI(t)
	upstream, _ := apiServer(t, p)
	tn := newTunnel(t, upstream, p.tunnel, p.ca, drainTimeout)
	client := podClient(t, p)

	req, err := http.NewRequest(http.MethodGet, "https://"+tn.addr+"/whoami", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer pod-token")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	t.Logf("upstream saw: %s", body)
	assert.Equal(t, "HTTP/2.0 system:serviceaccount:kube-system:coredns Bearer pod-token", string(body))
	assert.Equal(t, "kube-apiserver", resp.TLS.PeerCertificates[0].Subject.CommonName)
	assert.Empty(t, tn.node.String(), "a success logs nothing")
	assert.Empty(t, tn.server.String(), "a success logs nothing")
}

// A watch streams each event as it comes, and an upgraded connection (exec,
// port-forward) carries its own protocol.
func TestTunnelStreamsAndUpgrades(t *testing.T) {
	p := newPKI(t)
	upstream, streamNext := apiServer(t, p)
	tn := newTunnel(t, upstream, p.tunnel, p.ca, drainTimeout)

	client := podClient(t, p)
	resp, err := client.Get("https://" + tn.addr + "/watch")
	require.NoError(t, err)
	defer resp.Body.Close()
	events := bufio.NewReader(resp.Body)
	line, err := events.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "event 1\n", line)
	close(streamNext)
	line, err = events.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "event 2\n", line)

	conn, err := tls.Dial("tcp", tn.addr, p.podTLS(t, "http/1.1"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "POST /exec HTTP/1.1\r\nHost: "+apiServerName+"\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	require.NoError(t, err)
	r := bufio.NewReader(conn)
	resp, err = http.ReadResponse(r, nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	for _, msg := range []string{"ls\n", "exit\n"} {
		_, err = io.WriteString(conn, msg)
		require.NoError(t, err)
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "echo "+msg, line)
	}
}

// A client that half-closes still gets its answer: the end of what it sends
// travels to the upstream as a half-close, and the upstream's end back.
func TestTunnelHalfClose(t *testing.T) {
	p := newPKI(t)
	upstream, accepted := tcpUpstream(t)
	tn := newTunnel(t, upstream, p.tunnel, p.ca, drainTimeout)
	got, err := roundTrip(tn.addr, []byte("all I have to say"))
	require.NoError(t, err)
	assert.Equal(t, "all I have to say", string(got))
	assert.Equal(t, int32(1), accepted.Load())
}

func TestTunnelConcurrentConnections(t *testing.T) {
	const conns, size = 64, 256 << 10
	p := newPKI(t)
	upstream, accepted := tcpUpstream(t)
	tn := newTunnel(t, upstream, p.tunnel, p.ca, drainTimeout)
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for range conns {
		wg.Go(func() {
			payload := make([]byte, size)
			_, _ = rand.Read(payload)
			got, err := roundTrip(tn.addr, payload)
			if err == nil && !bytes.Equal(got, payload) {
				err = fmt.Errorf("got %d bytes back, not the %d sent", len(got), len(payload))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.Equal(t, int32(conns), accepted.Load())
	t.Logf("%d connections carried %d KiB each way, each", conns, size>>10)
}

// The node gives a pod's bytes to nothing but its tenant's sidecar: not to
// a server whose certificate another CA signed, nor to another tenant's
// sidecar. It closes the pod's connection and logs why; the upstream sees
// nothing.
func TestNodeRefusesAnUntrustedSidecar(t *testing.T) {
	p := newPKI(t)
	for name, tc := range map[string]struct {
		served *pkitest.KeyPair
		why    string
	}{
		"another CA":     {issue(t, newCA(t, "impostor-ca"), "kas-tunnel", tenantHost), "certificate signed by unknown authority"},
		"another tenant": {issue(t, p.ca, "kas-tunnel", "kas-tunnel.other.ns.example.test"), "certificate is valid for kas-tunnel.other.ns.example.test, not localhost"},
	} {
		t.Run(name, func(t *testing.T) {
			upstream, accepted := tcpUpstream(t)
			tn := newTunnel(t, upstream, tc.served, p.ca, drainTimeout)
			got, _ := roundTrip(tn.addr, []byte("secret"))
			assert.Empty(t, got, "the node closes the pod's connection")
			tn.node.waitFor(t, tc.why)
			assert.Contains(t, tn.node.String(), `"msg":"connection failed"`)
			assert.Equal(t, 1, strings.Count(tn.node.String(), "\n"), "one line per failure:\n%s", tn.node)
			assert.Equal(t, int32(0), accepted.Load())
			require.Error(t, tn.nodeEnd.Ready(context.Background()))
			t.Logf("node log: %s", tn.node)
		})
	}
}

// A node reads the cluster CA again when the file changes, as when the CA
// rotates.
func TestNodeRereadsTheCA(t *testing.T) {
	p := newPKI(t)
	upstream, _ := tcpUpstream(t)
	tn := newTunnel(t, upstream, p.tunnel, newCA(t, "old-ca"), drainTimeout)
	got, _ := roundTrip(tn.addr, []byte("ping"))
	require.Empty(t, got)
	tn.node.waitFor(t, "certificate signed by unknown authority")

	writeFiles(t, tn.dir, "ca", p.ca, true)
	got, err := roundTrip(tn.addr, []byte("ping"))
	require.NoError(t, err)
	assert.Equal(t, "ping", string(got))
	tn.node.waitFor(t, `"msg":"read files again"`)
}

// The sidecar serves a renewed certificate from the next connection on, and
// keeps serving the old one while the files do not match (the certificate
// written, the key not yet).
func TestServerPicksUpARenewedCertificate(t *testing.T) {
	p := newPKI(t)
	upstream, _ := tcpUpstream(t)
	tn := newTunnel(t, upstream, p.tunnel, p.ca, drainTimeout)
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", tn.serverAddr, &tls.Config{ServerName: tenantHost, RootCAs: p.pool()})
		require.NoError(t, err)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	require.Equal(t, p.tunnel.Cert.SerialNumber.String(), served())

	renewed := issue(t, p.ca, "kas-tunnel", tenantHost)
	writeFiles(t, tn.dir, "tunnel", renewed, true)
	assert.Equal(t, p.tunnel.Cert.SerialNumber.String(), served())
	tn.server.waitFor(t, "private key does not match public key")

	writeFiles(t, tn.dir, "tunnel", renewed, false)
	assert.Equal(t, renewed.Cert.SerialNumber.String(), served())
	tn.server.waitFor(t, `"msg":"read files again"`)
	got, err := roundTrip(tn.addr, []byte("still through"))
	require.NoError(t, err)
	assert.Equal(t, "still through", string(got))
	t.Logf("server log: %s", tn.server)
}

// On shutdown an end stops accepting at once, lets open connections go on
// for the drain time, then closes them.
func TestShutdownDrains(t *testing.T) {
	p := newPKI(t)
	upstream, accepted := tcpUpstream(t)
	tn := newTunnel(t, upstream, p.tunnel, p.ca, 500*time.Millisecond)

	finishing, err := net.Dial("tcp", tn.addr)
	require.NoError(t, err)
	defer finishing.Close()
	stuck, err := net.Dial("tcp", tn.addr)
	require.NoError(t, err)
	defer stuck.Close()
	_, err = io.WriteString(finishing, "first half, ")
	require.NoError(t, err)
	_, err = io.WriteString(stuck, "never finished")
	require.NoError(t, err)
	// Both tunnels are up once the sidecar connected upstream for each.
	require.Eventually(t, func() bool { return accepted.Load() == 2 }, 5*time.Second, 10*time.Millisecond)

	stopped := make(chan error, 1)
	start := time.Now()
	go func() { stopped <- tn.stopNode() }()
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", tn.addr)
		if err == nil {
			_ = c.Close()
		}
		return err != nil
	}, 5*time.Second, 10*time.Millisecond, "the node still accepts")

	_, err = io.WriteString(finishing, "second half")
	require.NoError(t, err)
	require.NoError(t, finishing.(*net.TCPConn).CloseWrite())
	got, err := io.ReadAll(finishing)
	require.NoError(t, err)
	assert.Equal(t, "first half, second half", string(got))

	require.NoError(t, <-stopped)
	assert.GreaterOrEqual(t, time.Since(start), 500*time.Millisecond)
	require.NoError(t, stuck.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = stuck.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the node closed the connection left open")
}

func TestHealth(t *testing.T) {
	p := newPKI(t)
	upstream, _ := tcpUpstream(t)
	tn := newTunnel(t, upstream, p.tunnel, p.ca, drainTimeout)
	get := func(e End, listening bool, path string) (int, string) {
		var l atomic.Bool
		l.Store(listening)
		rec := httptest.NewRecorder()
		health(&l, e.Ready).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	for _, e := range []End{tn.nodeEnd, tn.serverEnd} {
		code, _ := get(e, true, "/healthz")
		assert.Equal(t, http.StatusOK, code)
		code, _ = get(e, true, "/readyz")
		assert.Equal(t, http.StatusOK, code)
		code, body := get(e, false, "/healthz")
		assert.Equal(t, http.StatusServiceUnavailable, code)
		assert.Equal(t, "not listening", body)
	}
	assert.Empty(t, tn.server.String(), "a readiness check is no failure for the sidecar")

	// Without the sidecar the node is not ready, and says why.
	require.NoError(t, tn.stopServer())
	code, body := get(tn.nodeEnd, true, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "connection refused")
	t.Logf("node /readyz without its sidecar: %d %s", code, body)
	code, _ = get(tn.nodeEnd, true, "/healthz")
	assert.Equal(t, http.StatusOK, code)
}

// Run listens and serves health on the addresses given, and stops when its
// context ends.
func TestRun(t *testing.T) {
	p := newPKI(t)
	upstream, _ := tcpUpstream(t)
	tn := newTunnel(t, upstream, p.tunnel, p.ca, drainTimeout)
	listen, health := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, tn.serverEnd, listen, health) }()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + health + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 10*time.Millisecond)
	conn, err := tls.Dial("tcp", listen, &tls.Config{ServerName: tenantHost, RootCAs: p.pool()})
	require.NoError(t, err)
	assert.Equal(t, uint16(tls.VersionTLS13), conn.ConnectionState().Version)
	require.NoError(t, conn.Close())
	cancel()
	require.NoError(t, <-done)
	resp, err := http.Get("http://" + health + "/healthz")
	if assert.Error(t, err, "health is served no more") {
		return
	}
	_ = resp.Body.Close()
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

// With direct, the node forwards the pod's TLS to the API server behind the
// tenant's own load balancer, named as the endpoint is, without an outer
// TLS; it is ready once the API server there proves it holds a certificate
// of the cluster CA for that name.
func TestDirectNodeCarriesThePodsTLS(t *testing.T) {
	p := newPKI(t)
	p.apiServer = issue(t, p.ca, "kube-apiserver", apiServerName, tenantHost)
	upstream, _ := apiServer(t, p)
	_, port, err := net.SplitHostPort(upstream)
	require.NoError(t, err)
	dir, log := t.TempDir(), &logs{}
	writeFiles(t, dir, "ca", p.ca, true)
	node, err := NewNode(net.JoinHostPort(tenantHost, port), filepath.Join(dir, "ca.crt"), true, log.logger())
	require.NoError(t, err)
	require.NoError(t, node.Ready(t.Context()))
	addr, _ := serve(t, node)

	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/whoami", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer pod-token")
	resp, err := podClient(t, p).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "HTTP/2.0 system:serviceaccount:kube-system:coredns Bearer pod-token", string(body))

	other := newPKI(t)
	untrusted := t.TempDir()
	writeFiles(t, untrusted, "ca", other.ca, true)
	stranger, err := NewNode(net.JoinHostPort(tenantHost, port), filepath.Join(untrusted, "ca.crt"), true, log.logger())
	require.NoError(t, err)
	assert.Error(t, stranger.Ready(t.Context()), "an API server of another CA is not ready")
}

// droppingGateway stands in front of target as a Gateway does: it drops
// (closes at once) the first drop connections it accepts, as a Gateway
// does while it still routes to an API server pod that stopped listening,
// and passes the others on to target. It counts those it dropped.
func droppingGateway(t *testing.T, target string, drop int32) (addr string, dropped *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	dropped = &atomic.Int32{}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			if dropped.Load() < drop {
				dropped.Add(1)
				_ = conn.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = conn.Close()
				continue
			}
			go splice(conn, up)
		}
	}()
	return ln.Addr().String(), dropped
}

// nodeThrough is a Node that reaches the tenant's Server through gateway,
// trusting the CA in dir.
func nodeThrough(t *testing.T, gateway, dir string, patience time.Duration) (addr string, log *logs) {
	t.Helper()
	_, port, err := net.SplitHostPort(gateway)
	require.NoError(t, err)
	log = &logs{}
	node, err := NewNode(net.JoinHostPort(tenantHost, port), filepath.Join(dir, "ca.crt"), false, log.logger())
	require.NoError(t, err)
	node.patience = patience
	addr, _ = serve(t, node)
	return addr, log
}

// A connection the Gateway drops before the tunnel is open is tried again,
// since nothing of the pod's has left the node yet: the pod's request is
// answered rather than its connection reset, and the node logs the blip
// once, with its first error.
func TestNodeRetriesAConnectionTheGatewayDrops(t *testing.T) {
	p := newPKI(t)
	upstream, _ := apiServer(t, p)
	tn := newTunnel(t, upstream, p.tunnel, p.ca, drainTimeout)
	gateway, dropped := droppingGateway(t, tn.serverAddr, 3)
	addr, log := nodeThrough(t, gateway, tn.dir, handshakeTimeout)

	resp, err := podClient(t, p).Get("https://" + addr + "/whoami")
	require.NoError(t, err, "the pod's request")
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, int32(3), dropped.Load())
	assert.Contains(t, log.String(), `"msg":"connected after failed attempts","attempts":4,"firstError":"tunnel to localhost:`)
	assert.Equal(t, 1, strings.Count(log.String(), "\n"), "one line for the blip:\n%s", log)
}

// A Gateway that drops every connection costs the pod its connection once
// the node's patience is spent, and the node logs one line saying how
// often it tried.
func TestNodeGivesUpOnAGatewayThatDropsEverything(t *testing.T) {
	p := newPKI(t)
	upstream, _ := apiServer(t, p)
	tn := newTunnel(t, upstream, p.tunnel, p.ca, drainTimeout)
	gateway, dropped := droppingGateway(t, tn.serverAddr, 1<<30)
	addr, log := nodeThrough(t, gateway, tn.dir, time.Second)

	start := time.Now()
	resp, err := podClient(t, p).Get("https://" + addr + "/whoami")
	if err == nil {
		_ = resp.Body.Close()
	}
	require.Error(t, err, "the pod's connection ends")
	assert.Less(t, time.Since(start), 5*time.Second, "within the node's patience and a little")
	log.waitFor(t, `"msg":"connection failed"`)
	assert.Regexp(t, `after [0-9]+ attempts`, log.String())
	assert.Greater(t, dropped.Load(), int32(3))
}
