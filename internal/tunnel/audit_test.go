package tunnel

import (
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// auditReceiver is a webhook target over TLS that records what it was
// posted and with which token, and refuses posts while failing is set.
type auditReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	bodies  []string
	tokens  []string
	failing bool
}

func startAuditReceiver(t *testing.T) *auditReceiver {
	t.Helper()
	rcv := &auditReceiver{}
	rcv.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		if rcv.failing {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		rcv.bodies = append(rcv.bodies, string(body))
		rcv.tokens = append(rcv.tokens, r.Header.Get("Authorization"))
	}))
	t.Cleanup(rcv.Close)
	return rcv
}

func (rcv *auditReceiver) got() (bodies, tokens []string) {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	return append([]string(nil), rcv.bodies...), append([]string(nil), rcv.tokens...)
}

// kubeconfigFor writes the kubeconfig of a target as the controller
// renders it: the receiver's URL, its CA and a token.
func kubeconfigFor(t *testing.T, rcv *auditReceiver, path, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["audit"] = &clientcmdapi.Cluster{
		Server:                   rcv.URL + "/events",
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rcv.Certificate().Raw}),
	}
	cfg.AuthInfos["audit"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["audit"] = &clientcmdapi.Context{Cluster: "audit", AuthInfo: "audit"}
	cfg.CurrentContext = "audit"
	file := filepath.Join(t.TempDir(), path)
	require.NoError(t, clientcmd.WriteToFile(*cfg, file))
	return file
}

// Every target gets each batch unchanged, with its own token; a target
// that refuses makes the forwarder's answer an error that names it and
// no token, while the other target still got the batch.
func TestAuditForwarderPostsToEveryTarget(t *testing.T) {
	a, b := startAuditReceiver(t), startAuditReceiver(t)
	f, err := NewAuditForwarder([]string{
		kubeconfigFor(t, a, "a.kubeconfig", "token-of-a"),
		kubeconfigFor(t, b, "b.kubeconfig", "token-of-b"),
	}, 5*time.Second, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	fwd := httptest.NewServer(f)
	t.Cleanup(fwd.Close)

	const batch = `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"auditID":"1"}]}`
	resp, err := http.Post(fwd.URL, "application/json", strings.NewReader(batch))
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	for rcv, token := range map[*auditReceiver]string{a: "Bearer token-of-a", b: "Bearer token-of-b"} {
		bodies, tokens := rcv.got()
		assert.Equal(t, []string{batch}, bodies)
		assert.Equal(t, []string{token}, tokens)
	}

	b.mu.Lock()
	b.failing = true
	b.mu.Unlock()
	resp, err = http.Post(fwd.URL, "application/json", strings.NewReader(batch))
	require.NoError(t, err)
	msg, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	assert.Contains(t, string(msg), "target 1 ("+b.URL+"/events): answered 503 Service Unavailable")
	assert.NotContains(t, string(msg), "token-of")
	bodies, _ := a.got()
	assert.Len(t, bodies, 2, "the target that is up got the batch")
}
