package e2e

import (
	"bufio"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/test/pkitest"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
)

// issuer is a small OpenID Connect issuer on the host's external address,
// with a CA of its own: it serves its discovery document and signing keys
// over https, and signs tokens with any claims a test asks for.
type issuer struct {
	url  string
	ca   []byte
	sign jose.Signer
}

func startIssuer(t *testing.T) *issuer {
	t.Helper()
	ca, err := pkitest.NewCA("oidc-ca")
	require.NoError(t, err)
	kp, err := ca.Issue("oidc", nil, cluster.ExternalAddress)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, kp.Write(dir, "tls"))
	l, err := net.Listen("tcp", net.JoinHostPort(cluster.ExternalAddress, "0"))
	require.NoError(t, err)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	jwk := jose.JSONWebKey{Key: key, KeyID: "e2e", Algorithm: string(jose.RS256), Use: "sig"}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jwk}, (&jose.SignerOptions{}).WithType("JWT"))
	require.NoError(t, err)
	iss := &issuer{url: "https://" + l.Addr().String(), ca: ca.CertPEM(), sign: signer}

	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": iss.url, "jwks_uri": iss.url + "/keys", "id_token_signing_alg_values_supported": []string{"RS256"},
			"response_types_supported": []string{"id_token"}, "subject_types_supported": []string{"public"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{jwk.Public()}})
	})
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = server.ServeTLS(l, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")) }()
	t.Cleanup(func() { _ = server.Close() })
	return iss
}

// token is a token of the issuer for audience, with extra claims.
func (iss *issuer) token(t *testing.T, audience string, extra map[string]any) string {
	t.Helper()
	now := time.Now()
	claims := jwt.Claims{
		Issuer: iss.url, Subject: "alice", Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), Expiry: jwt.NewNumericDate(now.Add(time.Hour)),
	}
	raw, err := jwt.Signed(iss.sign).Claims(claims).Claims(extra).Serialize()
	require.NoError(t, err)
	return raw
}

// auditReceiver is an audit webhook target on the host's external address,
// with a CA of its own, that keeps the events posted with its token.
type auditReceiver struct {
	url, token string
	ca         []byte
	mu         sync.Mutex
	events     []auditv1.Event
}

func startAuditReceiver(t *testing.T) *auditReceiver {
	t.Helper()
	ca, err := pkitest.NewCA("audit-ca")
	require.NoError(t, err)
	kp, err := ca.Issue("audit", nil, cluster.ExternalAddress)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, kp.Write(dir, "tls"))
	l, err := net.Listen("tcp", net.JoinHostPort(cluster.ExternalAddress, "0"))
	require.NoError(t, err)
	rcv := &auditReceiver{url: "https://" + l.Addr().String() + "/events", token: randomHex(t), ca: ca.CertPEM()}
	server := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+rcv.token {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		list := auditv1.EventList{}
		if err := json.NewDecoder(r.Body).Decode(&list); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		rcv.events = append(rcv.events, list.Items...)
		rcv.mu.Unlock()
	})}
	go func() { _ = server.ServeTLS(l, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")) }()
	t.Cleanup(func() { _ = server.Close() })
	return rcv
}

// received is whether the receiver has the event of creating configMap.
func (rcv *auditReceiver) received(configMap string) error {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, e := range rcv.events {
		if createdConfigMap(&e, configMap) {
			return nil
		}
	}
	return fmt.Errorf("no audit event of creating ConfigMap %s among the %d the webhook received", configMap, len(rcv.events))
}

func createdConfigMap(e *auditv1.Event, name string) bool {
	return e.Verb == "create" && e.ObjectRef != nil && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Name == name && e.Level == auditv1.LevelMetadata
}

// whoAmI asks the hosted API server who a bearer token is.
func whoAmI(t *testing.T, admin *rest.Config, token string) (authenticationv1.UserInfo, error) {
	t.Helper()
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = token
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	review, err := c.AuthenticationV1().SelfSubjectReviews().Create(testContext(t), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return review.Status.UserInfo, nil
}

// oidcAndAudit gives the control plane name in ns an OIDC provider run by
// the test and an audit policy, as a platform team does on a running
// cluster: a token of the provider is accepted and mapped by the claim
// rules, one for another audience or failing a rule is refused; a change of
// the provider's mappings takes effect without restarting an API server;
// a request's audit event reaches the API server's standard output and two
// webhook targets the test runs, each posted with the token of its Secret
// by the forwarder beside the API server.
func oidcAndAudit(t *testing.T, ns, name string) {
	iss, receivers := startIssuer(t), []*auditReceiver{startAuditReceiver(t), startAuditReceiver(t)}
	key := client.ObjectKey{Namespace: ns, Name: name}
	var targets []v1alpha1.AuditWebhookTarget
	for i, receiver := range receivers {
		secret := fmt.Sprintf("audit-token-%d", i)
		require.NoError(t, k8s.Create(testContext(t), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret, Labels: map[string]string{userInput: "true"}}, Data: map[string][]byte{"token": []byte(receiver.token)},
		}))
		targets = append(targets, v1alpha1.AuditWebhookTarget{
			Server: receiver.url, CertificateAuthority: string(receiver.ca),
			Authentication: &v1alpha1.AuditWebhookAuthentication{SecretName: secret},
		})
	}
	provider := func(prefix string) v1alpha1.OIDCProvider {
		return v1alpha1.OIDCProvider{
			CertificateAuthority: string(iss.ca),
			Audiences:            []string{name},
			ClaimMappings:        v1alpha1.OIDCClaimMappings{Username: fmt.Sprintf("%q + claims.sub", prefix), Groups: "claims.groups"},
			ClaimValidationRules: []v1alpha1.OIDCClaimValidationRule{{Expression: `claims.team == "platform"`, Message: "only the platform team"}},
		}
	}
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(testContext(t), key, hcp))
	hcp.Spec.OIDCProviders = map[string]v1alpha1.OIDCProvider{iss.url: provider("oidc:")}
	hcp.Spec.Deployment.APIServer.Audit = &v1alpha1.Audit{Policy: auditv1.Policy{Rules: []auditv1.PolicyRule{
		{Level: auditv1.LevelMetadata, Resources: []auditv1.GroupResources{{Resources: []string{"configmaps"}}}},
		{Level: auditv1.LevelNone},
	}}, Webhook: &v1alpha1.AuditWebhook{Targets: targets}}
	require.NoError(t, k8s.Update(testContext(t), hcp))
	start := time.Now()
	admin := hostedConfig(t, ns, name)
	platform := map[string]any{"team": "platform", "groups": []string{"devs"}}

	eventually(t, 5*time.Minute, "a token of the issuer is accepted", func() error {
		user, err := whoAmI(t, admin, iss.token(t, name, platform))
		if err != nil {
			return err
		}
		if user.Username != "oidc:alice" {
			return fmt.Errorf("user %q", user.Username)
		}
		return nil
	})
	t.Logf("the API servers accept the issuer's tokens %s after the providers were set", time.Since(start).Round(time.Second))
	apiServersRolledOut(t, key)
	user, err := whoAmI(t, admin, iss.token(t, name, platform))
	require.NoError(t, err)
	assert.Contains(t, user.Groups, "devs", "groups mapped from the groups claim")

	_, err = whoAmI(t, admin, iss.token(t, "another-cluster", platform))
	assert.True(t, apierrors.IsUnauthorized(err), "a token for another audience is refused: %v", err)
	_, err = whoAmI(t, admin, iss.token(t, name, map[string]any{"team": "sales"}))
	assert.True(t, apierrors.IsUnauthorized(err), "a token failing a claim rule is refused: %v", err)

	t.Run("a request's audit event reaches the API server's standard output and both webhook targets", func(t *testing.T) {
		hosted, err := kubernetes.NewForConfig(admin)
		require.NoError(t, err)
		_, err = hosted.CoreV1().ConfigMaps("default").Create(testContext(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audited"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, time.Minute, "the audit event of the create is logged", func() error {
			return auditEventLogged(t, ns, name, "audited")
		})
		// The API server posts a batch at most 30s after its first event,
		// which the forwarder posts to both targets at once.
		for _, receiver := range receivers {
			eventually(t, 2*time.Minute, "the audit event of the create reaches the webhook at "+receiver.url, func() error {
				return receiver.received("audited")
			})
		}
	})

	t.Run("a new claim mapping takes effect without restarting an API server", func(t *testing.T) {
		pods := apiServerPods(t, ns, name)
		require.NoError(t, k8s.Get(testContext(t), key, hcp))
		hcp.Spec.OIDCProviders = map[string]v1alpha1.OIDCProvider{iss.url: provider("sso:")}
		require.NoError(t, k8s.Update(testContext(t), hcp))
		start := time.Now()
		eventually(t, 4*time.Minute, "the new mapping is in effect", func() error {
			user, err := whoAmI(t, admin, iss.token(t, name, platform))
			if err != nil {
				return err
			}
			if user.Username != "sso:alice" {
				return fmt.Errorf("user %q", user.Username)
			}
			return nil
		})
		t.Logf("the API servers map tokens anew %s after the change", time.Since(start).Round(time.Second))
		assert.Equal(t, pods, apiServerPods(t, ns, name), "the same API server pods, never restarted")
	})
}

// apiServersRolledOut waits until every API server pod runs the
// Deployment's newest template and is ready, and no pod of an older one is
// left: a terminating API server still answers on the connections it has
// (a client's kept-alive one among them) until it exits, and the
// Deployment's status no longer counts it.
func apiServersRolledOut(t *testing.T, key client.ObjectKey) {
	t.Helper()
	eventually(t, 5*time.Minute, "the API servers rolled out", func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(testContext(t), client.ObjectKey{Namespace: key.Namespace, Name: key.Name + "-apiserver"}, d); err != nil {
			return err
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		if s := d.Status; d.Generation != s.ObservedGeneration || s.Replicas != want || s.UpdatedReplicas != want || s.ReadyReplicas != want {
			return fmt.Errorf("generation %d observed %d: %d pods, %d up to date, %d ready of %d", d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, want)
		}
		pods := &corev1.PodList{}
		if err := k8s.List(testContext(t), pods, client.InNamespace(key.Namespace), client.MatchingLabels{
			contract.ComponentLabel: contract.APIServerComponent, contract.InstanceLabel: key.Name,
		}); err != nil {
			return err
		}
		if len(pods.Items) != int(want) {
			return fmt.Errorf("%d API server pods, terminating ones among them, where %d run", len(pods.Items), want)
		}
		return nil
	})
}

// apiServerPods are the API server pods by name, with their restart counts.
func apiServerPods(t *testing.T, ns, name string) map[string]int32 {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, k8s.List(testContext(t), pods, client.InNamespace(ns), client.MatchingLabels{
		contract.ComponentLabel: contract.APIServerComponent, contract.InstanceLabel: name,
	}))
	out := map[string]int32{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.ContainerStatuses {
			out[p.Name] += c.RestartCount
		}
	}
	return out
}

// auditEventLogged finds, in the standard output of an API server pod, the
// audit event of the creation of the ConfigMap configMap.
func auditEventLogged(t *testing.T, ns, name, configMap string) error {
	t.Helper()
	for pod := range apiServerPods(t, ns, name) {
		logs, err := clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "kube-apiserver"}).Stream(testContext(t))
		if err != nil {
			return err
		}
		scanner := bufio.NewScanner(logs)
		scanner.Buffer(make([]byte, 1<<20), 1<<20)
		for scanner.Scan() {
			line := scanner.Text()
			if !strings.HasPrefix(line, "{") {
				continue
			}
			event := auditv1.Event{}
			if json.Unmarshal([]byte(line), &event) == nil && createdConfigMap(&event, configMap) {
				_ = logs.Close()
				return nil
			}
		}
		_ = logs.Close()
	}
	return fmt.Errorf("no audit event of creating ConfigMap %s in the logs of the API servers", configMap)
}
