package netfail

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each failure is a real one, from a real request: Describe says what
// failed and quotes nothing of the address or the URL.
func TestDescribe(t *testing.T) {
	tlsServer := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsServer.Close()
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedAddr := closed.Listener.Addr().String()
	closed.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = silent.Close() }()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer func() { _ = c.Close() }() // accepted, never answered
		}
	}()

	for _, tc := range []struct{ name, url, want string }{
		{"a name that does not resolve", "https://planted-host.invalid/bucket?X-Amz-Signature=planted", "its host name does not resolve"},
		{"nothing listens", "https://" + closedAddr + "/bucket?X-Amz-Signature=planted", "the connection was refused"},
		{"a certificate nobody trusts", tlsServer.URL + "/bucket?X-Amz-Signature=planted", "its certificate is not signed by a CA the client trusts"},
		{"plain HTTP", strings.Replace(plain.URL, "http://", "https://", 1) + "/bucket?X-Amz-Signature=planted", "it does not answer in TLS"},
		{"no answer in time", "https://" + silent.Addr().String() + "/bucket?X-Amz-Signature=planted", "it did not answer in time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, tc.url, nil)
			require.NoError(t, err)
			resp, err := (&http.Client{}).Do(req)
			if resp != nil {
				_ = resp.Body.Close()
			}
			require.Error(t, err)
			got := Describe(err)
			assert.Equal(t, tc.want, strings.SplitN(got, " (", 2)[0])
			assert.NotContains(t, got, "planted")
			assert.NotContains(t, got, "127.0.0.1")
		})
	}
	assert.Empty(t, Describe(context.Canceled), "not a request's failure")
}
