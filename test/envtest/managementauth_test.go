package envtest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Service accounts of the management cluster (envtest's API server) reach
// a real hosted API server with tokens the management cluster issues for
// the control plane's audience: under the fixed prefix, with no permission
// until an RBAC binding in the workload cluster grants one. A token for
// another audience, or of a service account of a namespace not listed, is
// refused. Turning the authenticator off and on again takes effect in the
// running API server (it reloads its authentication configuration, which
// the test writes as the kubelet updates a projected volume) with no
// request to it failing meanwhile; the sidecar that serves it the
// management cluster's keys (tunnel keys, built from cmd/tunnel) runs as a
// process beside it. The control plane keeps an OIDC provider (an issuer
// the test runs), so the API server reads an authentication configuration
// throughout; without one, turning it on or off adds or removes the flag
// and the sidecar, which rolls the API servers.
//
// The same API server audits to two webhook targets (the test's), through
// the forwarder beside it (tunnel audit, another process): the creation of
// a ConfigMap reaches both, each with the token of its own Secret, one of
// them in another namespace and used only once a ReferenceGrant there
// allows it.
func TestManagementServiceAccounts(t *testing.T) {
	hosted(t)
	ctx := testContext(t)
	sso := startOIDCIssuer(t)
	name, port := "mgmt", freePort(t)
	_, hcp := readyControlPlane(t, name, "v1.36.3", func(h *v1alpha1.HostedControlPlane) {
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(port)}
		h.Spec.OIDCProviders = map[string]v1alpha1.OIDCProvider{sso.url: {
			CertificateAuthority: sso.ca, Audiences: []string{"sso"}, ClaimMappings: v1alpha1.OIDCClaimMappings{Username: `"sso:" + claims.sub`},
		}}
		h.Spec.ManagementServiceAccounts = &v1alpha1.ManagementServiceAccounts{}
	})
	ns := hcp.Namespace
	auditTargets := twoAuditTargets(t, hcp)
	d := get(t, &appsv1.Deployment{}, ns, name+"-apiserver")
	keys, forwarder := container(t, d, "management-keys"), container(t, d, "audit-forwarder")

	dir, tunnel := t.TempDir(), buildTunnel(t)
	h := runHostedEtcd(t, ns, name)
	apiserver, _ := h.startAPIServerIn(t, dir, port, nil)
	for _, c := range []corev1.Container{keys, forwarder} {
		sidecar, err := StartProcess(tunnel, nil, mountInto(t, ns, dir, d.Spec.Template.Spec.Volumes, c)...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sidecar.Stop(5 * time.Second) })
	}
	syncSecretFiles(t, ns, name+"-authentication", filepath.Join(dir, contract.APIServerAuthenticationDir))

	admin := workloadConfig(t, ns, name)
	waitFor(t, "the hosted API server ready", func() error {
		c, err := kubernetes.NewForConfig(admin)
		if err != nil {
			return err
		}
		_, err = c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
	readyz := watchReadyz(t, admin)

	workload, err := kubernetes.NewForConfig(admin)
	require.NoError(t, err)
	_, err = workload.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audited"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for target, token := range auditTargets {
		waitFor(t, "the audit event at "+target.URL, func() error { return target.received(token, "audited") })
	}

	// Service accounts of the management cluster: one of the control
	// plane's namespace, one of another tenant's.
	other := namespace(t)
	for _, sa := range []client.ObjectKey{{Namespace: ns, Name: "automation"}, {Namespace: other, Name: "automation"}} {
		require.NoError(t, env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.Namespace, Name: sa.Name}}))
	}
	audience := contract.ManagementAudience(ns, name)
	token := managementToken(t, ns, "automation", audience)
	user := contract.ManagementUserPrefix + "system:serviceaccount:" + ns + ":automation"

	var review *authenticationv1.SelfSubjectReview
	waitFor(t, "the management cluster's token accepted", func() error {
		review, err = as(t, admin, token).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		return err
	})
	assert.Equal(t, user, review.Status.UserInfo.Username)
	assert.ElementsMatch(t, []string{contract.ManagementUserPrefix + "system:serviceaccounts:" + ns, "system:authenticated"}, review.Status.UserInfo.Groups)

	_, err = as(t, admin, token).CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "no permission before a binding: %v", err)
	// A role of its own: view aggregates its rules through the controller
	// manager, which does not run here.
	_, err = workload.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = workload.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "platform-automation"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, "the binding to let the management service account list pods", func() error {
		_, err := as(t, admin, token).CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
		return err
	})

	for what, refused := range map[string]string{
		"a token for another audience": managementToken(t, ns, "automation", "controlplane.cluster.x-k8s.io/"+other+"/"+name),
		"another namespace's token":    managementToken(t, other, "automation", audience),
	} {
		_, err := as(t, admin, refused).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		assert.True(t, apierrors.IsUnauthorized(err), "%s: %v", what, err)
	}

	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) { h.Spec.ManagementServiceAccounts = nil }))
	waitFor(t, "the token refused once turned off", func() error {
		_, err := as(t, admin, token).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("not refused yet: %w", err)
		}
		return nil
	})
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.ManagementServiceAccounts = &v1alpha1.ManagementServiceAccounts{}
	}))
	waitFor(t, "the token accepted once turned on again", func() error {
		_, err := as(t, admin, token).CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
		return err
	})
	exited, _ := apiserver.Exited()
	assert.False(t, exited, "the API server reloaded, it did not restart")
	assert.Zero(t, readyz.failed.Load(), "requests to /readyz failed while the authenticator came and went (%d answered)", readyz.answered.Load())
	assert.Positive(t, readyz.answered.Load())
}

// container is the container (or native sidecar) of a Deployment's pods
// named name.
func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, name)
	return corev1.Container{}
}

// buildTunnel builds cmd/tunnel, whose keys command is the sidecar.
func buildTunnel(t *testing.T) string {
	t.Helper()
	root, err := RepoRoot()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "tunnel")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/tunnel")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

// syncSecretFiles writes the Secret's keys into dir again whenever they
// change, as the kubelet updates a projected volume (writeSecretData),
// until the test ends.
func syncSecretFiles(t *testing.T, ns, name, dir string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		written := ""
		for ctx.Err() == nil {
			secret := &corev1.Secret{}
			if env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, secret) == nil {
				if digest := contract.DataDigest(secret.Data); digest != written && writeSecretData(secret.Data, dir) == nil {
					written = digest
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}

// workloadConfig is the admin configuration of <cluster>-kubeconfig.
func workloadConfig(t *testing.T, ns, cluster string) *rest.Config {
	t.Helper()
	secret := get(t, &corev1.Secret{}, ns, cluster+"-kubeconfig")
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	require.NoError(t, err)
	return cfg
}

// as is a client of the workload cluster that presents only the token.
func as(t *testing.T, admin *rest.Config, token string) kubernetes.Interface {
	t.Helper()
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = token
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// managementToken is a token the management cluster issues for a service
// account, as kubectl create token does.
func managementToken(t *testing.T, ns, sa, audience string) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](3600),
	}}
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}
	require.NoError(t, env.Client.SubResource("token").Create(testContext(t), account, req))
	return req.Status.Token
}

// readyzWatch counts the answers of an API server's /readyz.
type readyzWatch struct{ answered, failed atomic.Int64 }

// watchReadyz asks /readyz every 100ms until the test ends.
func watchReadyz(t *testing.T, admin *rest.Config) *readyzWatch {
	t.Helper()
	c, err := kubernetes.NewForConfig(admin)
	require.NoError(t, err)
	w := &readyzWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
			rcancel()
			switch {
			case ctx.Err() != nil:
			case err != nil:
				w.failed.Add(1)
				t.Logf("/readyz: %v", err)
			default:
				w.answered.Add(1)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return w
}

// oidcIssuer is an OIDC issuer the test runs: its discovery document and
// keys over TLS, which the API server checks before it takes a new
// authentication configuration.
type oidcIssuer struct{ url, ca string }

func startOIDCIssuer(t *testing.T) oidcIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "sso", Algorithm: "RS256", Use: "sig"}}})
	require.NoError(t, err)
	var url string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": url, "jwks_uri": url + "/keys", "response_types_supported": []string{"id_token"},
			"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(jwks) })
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	url = srv.URL
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return oidcIssuer{url: url, ca: string(ca)}
}
