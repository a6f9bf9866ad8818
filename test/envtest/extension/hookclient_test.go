package extension

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

var (
	catalog = sync.OnceValue(func() *runtimecatalog.Catalog {
		c := runtimecatalog.New()
		if err := runtimehooksv1.AddToCatalog(c); err != nil {
			panic(err)
		}
		return c
	})
	// hookHTTP calls the extension as Cluster API does: over TLS, trusting
	// the CA an ExtensionConfig would carry, reusing connections.
	hookHTTP = sync.OnceValue(func() *http.Client {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(env.WebhookCA())
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		}}
	})
)

// callHook sends req to the running extension's handler of hook and decodes
// its answer into resp.
func callHook(t testing.TB, hook runtimecatalog.Hook, handler string, req, resp any) {
	t.Helper()
	gvh, err := catalog().GroupVersionHook(hook)
	require.NoError(t, err)
	body, err := json.Marshal(req)
	require.NoError(t, err)
	url := fmt.Sprintf("https://127.0.0.1:%d%s", extPort, runtimecatalog.GVHToPath(gvh, handler))
	r, err := hookHTTP().Post(url, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer func() { _ = r.Body.Close() }()
	data, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", data)
	require.NoError(t, json.Unmarshal(data, resp), "%s", data)
}
