package controller

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Each probe asks over a new connection and closes it: a pooled connection
// can outlive the path it came through (a Gateway keeps splicing an open
// connection after its route is deleted), so reusing one would report an
// API server that new clients no longer reach.
func TestReadyzProberUsesAConnectionOfItsOwn(t *testing.T) {
	var (
		mu             sync.Mutex
		opened, closed int
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			_, _ = w.Write([]byte("ok"))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch state {
		case http.StateNew:
			opened++
		case http.StateClosed:
			closed++
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{
		Server:                   srv.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	kubeconfig, err := clientcmd.Write(*cfg)
	require.NoError(t, err)

	p := ReadyzProber{Timeout: 5 * time.Second}
	for range 3 {
		require.NoError(t, p.Probe(context.Background(), kubeconfig))
	}
	assert.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return opened == 3 && closed == 3
	}, 5*time.Second, 10*time.Millisecond, "three probes, three connections, all closed")
}
