package envtest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// A rotation of the front proxy CA walks its phases with two real API
// servers restarted one at a time whenever their template changes, while a
// client reads and writes through those in service: no request fails. The
// API servers take a request that the front proxy forwards (its client
// certificate, the user in X-Remote-User) from a certificate of the old CA
// before, and refuse it after; they take one of the new CA's, and publish
// the new CA to extension API servers
// (kube-system/extension-apiserver-authentication).
func TestFrontProxyCARotation(t *testing.T) {
	const name = "proxyca"
	ports := []int{freePort(t), freePort(t)}
	_, hcp := readyControlPlane(t, name, "v1.36.3", func(h *v1alpha1.HostedControlPlane) {
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(ports[0])}
		h.Spec.Etcd.Replicas = ptr.To[int32](1)
	})
	ns := hcp.Namespace
	members := runEtcdMembers(t, hcp, 1)
	apis := newAPIServers(t, members.hosted(), ports)
	rollPodsOf(t, hcp, name+"-apiserver")
	waitCondition(t, hcp, v1alpha1.FrontProxyCAReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)

	load := startLoad(t, ns, name, ports) // once each API server answers: its RBAC bootstrapped, alice may ask who she is
	oldCA := get(t, &corev1.Secret{}, ns, name+"-proxy")
	byOldCA := signedClientOf(t, oldCA, "front-proxy-client")
	assert.Equal(t, "alice", proxiedUser(t, ports[0], byOldCA), "before: the front proxy's certificate of the old CA is taken")
	reasons := watchReasons(t, hcp, v1alpha1.FrontProxyCAReadyCondition)
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Annotations[v1alpha1.RotateAnnotation] = v1alpha1.RotateFrontProxyCA
	}))
	start := time.Now()
	waitForLong(t, "the front proxy CA is rotated", 10*time.Minute, func() error {
		members.roll(t)
		apis.roll(t, hcp, load)
		cp := get(t, &v1alpha1.HostedControlPlane{}, ns, name)
		if st := cp.Status.CertificateAuthorities.FrontProxy; st.Rotation != nil || st.RotatedAt == nil {
			return fmt.Errorf("status.certificateAuthorities.frontProxy: %+v; %s; %s", st.Rotation,
				conditionOf(cp, v1alpha1.FrontProxyCAReadyCondition), conditionOf(cp, v1alpha1.APIServerReadyCondition))
		}
		return nil
	})
	t.Logf("BENCH rotation_front_proxy_ca_envtest_s %.1f s", time.Since(start).Seconds())
	apis.roll(t, hcp, load)
	ok, failures := load.stop()
	assert.Empty(t, failures, "no request failed through the phases")
	assert.Greater(t, ok, 50, "the client kept asking")
	t.Logf("%d requests, %d failed", ok+len(failures), len(failures))

	seen := strings.Join(reasons(), "\n")
	for _, phase := range []v1alpha1.RotationPhase{v1alpha1.TrustingNewCA, v1alpha1.IssuingFromNewCA, v1alpha1.DroppingOldCA} {
		assert.Contains(t, seen, string(phase)+": rotation of the front proxy CA asked for at ", "FrontProxyCAReady named the phase")
	}
	assert.Equal(t, get(t, &v1alpha1.HostedControlPlane{}, ns, name).Status.CertificateAuthorities.Etcd, v1alpha1.CertificateAuthorityStatus{},
		"the etcd CA is not rotated")

	newCA := get(t, &corev1.Secret{}, ns, name+"-proxy")
	root := parseCert(t, newCA.Data["tls.crt"])
	require.NoError(t, root.CheckSignatureFrom(root), "a root of its own")
	for _, port := range ports {
		assert.NotEqual(t, "alice", proxiedUser(t, port, byOldCA), "after: the front proxy's certificate of the old CA is refused")
		assert.Equal(t, "alice", proxiedUser(t, port, signedClientOf(t, newCA, "front-proxy-client")), "one of the new CA is taken")
	}
	published := workloadClient(t, ns, name)
	cm, err := published.CoreV1().ConfigMaps("kube-system").Get(testContext(t), "extension-apiserver-authentication", metav1.GetOptions{})
	require.NoError(t, err)
	// The API servers add their CA to what the ConfigMap holds, and drop
	// only expired ones: the old CA stays there (see the README).
	assert.Contains(t, cm.Data["requestheader-client-ca-file"], strings.TrimSpace(string(newCA.Data["ca.crt"])),
		"extension API servers are told to trust the new CA")
}

// proxiedUser is who the API server on port takes a request for, that
// comes with cfg's client certificate as the front proxy's and names alice
// in X-Remote-User; empty when it refuses the request.
func proxiedUser(t *testing.T, port int, cfg *tls.Config) string {
	t.Helper()
	body := strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost,
		fmt.Sprintf("https://127.0.0.1:%d/apis/authentication.k8s.io/v1/selfsubjectreviews", port), body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Remote-User", "alice")
	req.Header.Set("X-Remote-Group", "system:authenticated")
	resp, err := proxiedClient(cfg).Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusCreated {
		msg, _ := io.ReadAll(resp.Body)
		t.Logf("the API server on :%d refused the request: %s %.300s", port, resp.Status, msg)
		return ""
	}
	review := &authenticationv1.SelfSubjectReview{}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(review))
	return review.Status.UserInfo.Username
}

func proxiedClient(cfg *tls.Config) *http.Client {
	cfg = cfg.Clone()
	cfg.InsecureSkipVerify = true //nolint:gosec // the API server's certificate is not what is tested
	cfg.RootCAs = x509.NewCertPool()
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}
