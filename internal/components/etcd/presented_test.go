package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/test/pkitest"
)

// fakeMember serves TLS, as a member's client and peer ports do, with the
// certificate it holds at each handshake, and asks for a client certificate
// of clientCAs (so a client it does not trust is refused after it has seen
// the member's certificate).
type fakeMember struct {
	endpoint string
	serving  atomic.Pointer[tls.Certificate]
}

func startMember(t *testing.T, cert tls.Certificate, clientCAs *x509.CertPool) *fakeMember {
	t.Helper()
	// A loopback address of its own, since the peer port is fixed.
	var host string
	var lns []net.Listener
	for attempt := 0; len(lns) < 2 && attempt < 20; attempt++ {
		for _, l := range lns {
			_ = l.Close()
		}
		lns = nil
		host = fmt.Sprintf("127.%d.%d.%d", 1+time.Now().UnixNano()%250, 1+attempt, 2+time.Now().UnixNano()%250)
		for _, port := range []int{0, peerPort} {
			l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				break
			}
			lns = append(lns, l)
		}
	}
	require.Len(t, lns, 2, "a loopback address with the peer port free")
	m := &fakeMember{endpoint: lns[0].Addr().String()}
	m.serving.Store(&cert)
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return m.serving.Load(), nil },
	}
	for _, l := range lns {
		t.Cleanup(func() { _ = l.Close() })
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					_ = conn.(interface{ SetDeadline(time.Time) error }).SetDeadline(time.Now().Add(5 * time.Second))
					tc := tls.Server(conn, cfg)
					_ = tc.Handshake()
					_ = tc.Close()
				}()
			}
		}()
	}
	return m
}

// A member that presents a certificate of the old CA, on either port, is
// named; once it holds one of the new CA it presents that at the next
// handshake, and nothing is wrong. The health-check client certificate
// being refused changes nothing.
func TestPresents(t *testing.T) {
	oldCA, err := pkitest.NewCA("etcd-ca")
	require.NoError(t, err)
	newCA, err := pkitest.NewCA("etcd-ca")
	require.NoError(t, err)
	const serverName = "demo-etcd.ns.svc"
	leaf := func(ca *pkitest.KeyPair) tls.Certificate {
		kp, err := ca.Issue("etcd-server", nil, serverName, "localhost")
		require.NoError(t, err)
		return kp.TLSCertificate()
	}
	client, err := newCA.Issue("kube-etcd-healthcheck-client", nil)
	require.NoError(t, err)
	clientKey, err := client.KeyPEM()
	require.NoError(t, err)
	trustsClient := x509.NewCertPool()
	trustsClient.AddCert(newCA.Cert)
	refusesClient := x509.NewCertPool()
	refusesClient.AddCert(oldCA.Cert)

	renewed := startMember(t, leaf(newCA), trustsClient)
	stale := startMember(t, leaf(oldCA), refusesClient)
	target := Target{
		Cluster: types.NamespacedName{Namespace: "ns", Name: "demo"}, ServerName: serverName,
		Endpoints: []string{renewed.endpoint, stale.endpoint},
		Names:     map[string]string{renewed.endpoint: "demo-etcd-0", stale.endpoint: "demo-etcd-1"},
		Credentials: render.Credentials{
			Cert: client.CertPEM(), Key: clientKey, CA: append(oldCA.CertPEM(), newCA.CertPEM()...),
		},
	}
	c := NewChecker()
	ctx := context.Background()

	err = c.Presents(ctx, target, newCA.CertPEM())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "member demo-etcd-1 on its client port")
	assert.Contains(t, err.Error(), "member demo-etcd-1 on its peer port")
	assert.Contains(t, err.Error(), "certificate signed by unknown authority")
	assert.NotContains(t, err.Error(), "demo-etcd-0", "the member of the new CA is not named")
	err = c.Presents(ctx, target, oldCA.CertPEM())
	require.Error(t, err, "verified with the old CA, the member of the new one is named")
	assert.Contains(t, err.Error(), "member demo-etcd-0 on its client port")
	assert.NotContains(t, err.Error(), "demo-etcd-1")

	renewedLeaf := leaf(newCA)
	stale.serving.Store(&renewedLeaf)
	assert.NoError(t, c.Presents(ctx, target, newCA.CertPEM()), "the next handshake presents the certificate held then")

	target.Endpoints = append(target.Endpoints, "127.0.0.1:1")
	err = c.Presents(ctx, target, newCA.CertPEM())
	require.Error(t, err, "a member that does not answer presents nothing")
	assert.Contains(t, err.Error(), "member 127.0.0.1:1 on its client port")
}
