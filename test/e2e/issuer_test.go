package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// anonymousGet is a GET of url without credentials, trusting only the CA
// of cfg and dialing as cfg does, as a cloud's identity federation makes
// it: the status and body of the answer.
func anonymousGet(t *testing.T, cfg *rest.Config, url string) (int, []byte, error) {
	t.Helper()
	hc, err := rest.HTTPClientFor(rest.AnonymousClientConfig(cfg))
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, url, http.NoBody)
	require.NoError(t, err)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// issuerDiscovered checks spec.serviceAccountIssuer (issuer, the control
// plane's endpoint) as a cloud's identity federation uses it: without
// credentials, the discovery document at the endpoint names issuer and the
// keys, the keys verify a token the workload cluster issues (TokenRequest)
// for issuer, and every other path a federation has no business with stays
// refused to anonymous requests. other is a control plane without the
// field, whose discovery document is refused to them.
func issuerDiscovered(t *testing.T, key client.ObjectKey, issuer string, other client.ObjectKey) {
	t.Helper()
	cfg := hostedConfig(t, key.Namespace, key.Name)
	discovery := struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}{}
	// The binding that makes it anonymous is written in the workload
	// cluster through Cluster API's ClusterCache.
	eventually(t, 2*time.Minute, "the discovery document served anonymously", func() error {
		status, body, err := anonymousGet(t, cfg, issuer+"/.well-known/openid-configuration")
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("status %d: %s", status, body)
		}
		return json.Unmarshal(body, &discovery)
	})
	assert.Equal(t, issuer, discovery.Issuer, "the issuer of the discovery document")
	require.Equal(t, issuer+"/openid/v1/jwks", discovery.JWKSURI, "the keys at the issuer's endpoint")

	status, body, err := anonymousGet(t, cfg, discovery.JWKSURI)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "the keys served anonymously: %s", body)
	keys := jose.JSONWebKeySet{}
	require.NoError(t, json.Unmarshal(body, &keys))
	require.NotEmpty(t, keys.Keys, "the JWKS has keys")

	hosted, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx := testContext(t)
	_, err = hosted.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "federated"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	const audience = "sts.cloud.example"
	req, err := hosted.CoreV1().ServiceAccounts("default").CreateToken(ctx, "federated", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	token, err := jwt.ParseSigned(req.Status.Token, []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.ES384, jose.ES512})
	require.NoError(t, err)
	claims := jwt.Claims{}
	require.NoError(t, token.Claims(keys, &claims), "the JWKS verifies the workload cluster's token")
	require.NoError(t, claims.ValidateWithLeeway(jwt.Expected{
		Issuer: issuer, Subject: "system:serviceaccount:default:federated", AnyAudience: jwt.Audience{audience}, Time: time.Now(),
	}, time.Minute), "the token is for the issuer the user chose")

	for _, path := range []string{"/api", "/apis", "/api/v1/namespaces", "/api/v1/namespaces/kube-system/secrets", "/api/v1/namespaces/default/serviceaccounts/federated"} {
		status, body, err := anonymousGet(t, cfg, issuer+path)
		require.NoError(t, err)
		assert.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, status, "an anonymous GET %s is refused: %s", path, body)
	}
	otherCfg := hostedConfig(t, other.Namespace, other.Name)
	status, body, err = anonymousGet(t, otherCfg, otherCfg.Host+"/.well-known/openid-configuration")
	require.NoError(t, err)
	assert.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, status,
		"without serviceAccountIssuer the discovery document is not anonymous: %s", body)
}
