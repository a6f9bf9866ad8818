package controller

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// The management cluster's issuer is read from its API server's discovery
// document and keys, once per issuerRefresh for every control plane; a
// document without keys is an error that says so.
func TestManagementIssuerIsReadOncePerRefresh(t *testing.T) {
	var asked atomic.Int32
	keys := `{"keys":[{"kid":"a"}]}`
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		_, _ = w.Write([]byte(`{"issuer":"https://management.example.com","id_token_signing_alg_values_supported":["RS256"]}`))
	})
	mux.HandleFunc("/openid/v1/jwks", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(keys)) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)

	source := NewIssuerSource(dc.RESTClient())
	got, err := source.ManagementIssuer(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "https://management.example.com", got.URL)
	assert.Equal(t, []string{"RS256"}, got.Algorithms)
	assert.JSONEq(t, keys, string(got.Keys))
	_, err = source.ManagementIssuer(t.Context())
	require.NoError(t, err)
	assert.Equal(t, int32(1), asked.Load(), "asked again within the refresh")

	keys = `{"keys":[]}`
	_, err = NewIssuerSource(dc.RESTClient()).ManagementIssuer(t.Context())
	assert.EqualError(t, err, "the management cluster's API server serves no service account keys at /openid/v1/jwks")

	// Past the refresh, a failure keeps what was read before.
	source.(*managementIssuer).fetched = time.Now().Add(-2 * issuerRefresh)
	again, err := source.ManagementIssuer(t.Context())
	require.NoError(t, err)
	assert.Equal(t, got, again)
	assert.Equal(t, int32(3), asked.Load(), "the first source asked twice, the other once")
}

// A management API server that cannot be reached is told without its
// address, which a tenant's condition has no business showing.
func TestManagementIssuerUnreachableNamesNoAddress(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: url})
	require.NoError(t, err)
	_, err = NewIssuerSource(dc.RESTClient()).ManagementIssuer(t.Context())
	require.Error(t, err)
	assert.NotContains(t, err.Error(), url[len("http://"):])
	assert.Contains(t, err.Error(), "cannot read its issuer discovery document from the management cluster's API server")
}
