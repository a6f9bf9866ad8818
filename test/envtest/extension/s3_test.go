package extension

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
)

// s3Server is a real S3-compatible server: versitygw, built from source by
// `make versitygw`, serving its posix backend over TLS on 127.0.0.1 with
// root credentials made up for the test. Clients reach it through a relay
// that can kill it once a given number of bytes has passed towards it.
type s3Server struct {
	t              testing.TB
	dir            string
	addr           string
	access, secret string
	ca             []byte
	proc           *envtest.Process
	relay          *relay
	// client is the test's own view of the store, straight to the server.
	client *minio.Client
}

func startS3(t testing.TB) *s3Server {
	t.Helper()
	bin := os.Getenv("VERSITYGW")
	require.NotEmpty(t, bin, "VERSITYGW is not set: run the tests with `make envtest`, which builds versitygw")
	dir := t.TempDir()
	ca := newCA(t, "s3-ca")
	cert, key := issue(t, ca, "versitygw", "127.0.0.1")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), cert, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o700))
	port, err := envtest.FreePort()
	require.NoError(t, err)
	s := &s3Server{
		t: t, dir: dir, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		access: randomString(t), secret: randomString(t), ca: ca.CertPEM(),
	}
	s.start()
	t.Cleanup(func() { s.kill() })
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.ca)
	transport, err := minio.DefaultTransport(true)
	require.NoError(t, err)
	transport.TLSClientConfig.RootCAs = roots
	s.client, err = minio.New(s.addr, &minio.Options{
		Creds: credentials.NewStaticV4(s.access, s.secret, ""), Secure: true, Transport: transport, Region: "us-east-1",
	})
	require.NoError(t, err)
	s.relay = startRelay(t, s.addr)
	return s
}

func randomString(t testing.TB) string {
	b := make([]byte, 12)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// start runs versitygw on the server's address and data, and waits until it
// answers.
func (s *s3Server) start() {
	s.t.Helper()
	p, err := envtest.StartProcess(os.Getenv("VERSITYGW"), nil,
		"--access", s.access, "--secret", s.secret, "--port", s.addr, "--region", "us-east-1",
		"--cert", filepath.Join(s.dir, "tls.crt"), "--key", filepath.Join(s.dir, "tls.key"), "--quiet",
		"posix", "--sidecar", filepath.Join(s.dir, "meta"), filepath.Join(s.dir, "data"))
	require.NoError(s.t, err)
	s.proc = p
	require.NoError(s.t, os.MkdirAll(filepath.Join(s.dir, "meta"), 0o700))
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			_ = conn.Close()
			return
		}
		if exited, _ := p.Exited(); exited || time.Now().After(deadline) {
			s.t.Fatalf("versitygw does not listen on %s: %v\n%s", s.addr, err, p.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill stops versitygw at once, as a crash or a lost node would.
func (s *s3Server) kill() {
	if s.proc != nil {
		_ = s.proc.Kill()
		s.proc = nil
	}
}

// backupSecret is the backup Secret "s3" for the store, reached through
// the relay, with bucket (and prefix) bucket.
func (s *s3Server) backupSecret(ns, bucket string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"},
		Data: map[string][]byte{
			"host": []byte(s.relay.addr), "region": []byte("us-east-1"), "bucket": []byte(bucket),
			"accessKeyID": []byte(s.access), "secretAccessKey": []byte(s.secret), "ca.crt": s.ca,
		},
	}
}

// relay forwards TCP connections to a server; armed, it calls cut once the
// given number of bytes has passed, either way, and drops the connection
// that crossed the limit, without passing more: what the server had sent
// already would otherwise still arrive after it is killed.
type relay struct {
	addr     string
	upstream string
	passed   atomic.Int64
	mu       sync.Mutex
	limit    int64
	cut      func()
}

func startRelay(t testing.TB, upstream string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	r := &relay{addr: ln.Addr().String(), upstream: upstream}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serve(conn)
		}
	}()
	return r
}

// arm makes the relay call cut once limit more bytes have passed.
func (r *relay) arm(limit int64, cut func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limit, r.cut = r.passed.Load()+limit, cut
}

func (r *relay) serve(conn net.Conn) {
	defer func() { _ = conn.Close() }()
	up, err := net.Dial("tcp", r.upstream)
	if err != nil {
		return
	}
	defer func() { _ = up.Close() }()
	go func() { r.pass(conn, up); _ = conn.Close() }()
	r.pass(up, conn)
}

// pass copies from src to dst, counting what passed.
func (r *relay) pass(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if r.count(int64(n)) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// count counts n bytes and tells whether they crossed the armed limit.
func (r *relay) count(n int64) bool {
	passed := r.passed.Add(n)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cut != nil && passed >= r.limit {
		r.cut()
		r.cut = nil
		return true
	}
	return false
}

// snapshotObjects lists the objects under prefix in bucket, as the store
// holds them.
func (s *s3Server) snapshotObjects(ctx context.Context, bucket, prefix string) []minio.ObjectInfo {
	s.t.Helper()
	var out []minio.ObjectInfo
	for obj := range s.client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		require.NoError(s.t, obj.Err)
		out = append(out, obj)
	}
	return out
}

// emptyAndRemoveBucket deletes every object of bucket and the bucket.
func (s *s3Server) emptyAndRemoveBucket(ctx context.Context, bucket string) {
	s.t.Helper()
	for _, obj := range s.snapshotObjects(ctx, bucket, "") {
		require.NoError(s.t, s.client.RemoveObject(ctx, bucket, obj.Key, minio.RemoveObjectOptions{}))
	}
	require.NoError(s.t, s.client.RemoveBucket(ctx, bucket))
}
