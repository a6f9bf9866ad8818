package e2e

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
)

// serviceAccountKeyRotatedWithoutFailures rotates the service account key
// of a Cluster with a joined worker while rotationClients count failures,
// the pod "counter" (leavesRenewedWithoutFailures) among them with a token
// of the old key. The API servers roll to trust the new key, then they and
// the controller manager roll to sign with it. The wait for the old key's
// tokens to expire (at least an hour: the API servers refuse a shorter
// --service-account-max-token-expiration) is ended the way the README tells
// a user to: the pods whose tokens the old key signed are replaced (the
// counter, and the add-ons in kube-system by a rollout restart), and the
// drop-old-service-account-key annotation drops the old key. A new counter
// counts across that last roll. Nothing fails, a token of the old key is
// accepted until the end and refused after, the worker stays Ready and
// joined, and kubectl exec reaches a pod through konnectivity, whose agents
// authenticate with tokens of the new key.
func serviceAccountKeyRotatedWithoutFailures(t *testing.T, cfg *rest.Config, hosted kubernetes.Interface, key client.ObjectKey, nodeName string) {
	ctx := testContext(t)
	node, err := hosted.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	require.NoError(t, err)
	oldToken := defaultToken(t, hosted)
	require.True(t, authenticated(t, hosted, oldToken), "a token of the old key is accepted before")
	_, failedBefore, _ := countedByProbe(t, hosted, "counter")
	clients := startRotationClients(t, cfg, hosted)
	start := time.Now()

	annotate(t, key, v1alpha1.RotateAnnotation, v1alpha1.RotateServiceAccountKey)
	waitRotation(t, key, 15*time.Minute, func(r *v1alpha1.KeyRotation) bool { return r != nil && r.Phase == v1alpha1.WaitingForOldTokens })
	signed := time.Since(start)
	newToken := defaultToken(t, hosted)
	require.NotEqual(t, tokenKeyID(t, oldToken), tokenKeyID(t, newToken), "the API servers sign with the new key")
	require.True(t, authenticated(t, hosted, oldToken), "a token of the old key is accepted while the old key is trusted")

	requests, failed, failures := countedByProbe(t, hosted, "counter")
	t.Logf("from the pod with the old key's token, until it was replaced: %d requests, %d failed", requests, failed)
	assert.Equal(t, failedBefore, failed, "requests that failed from the pod while the API servers rolled to trust and sign with the new key: %v", failures)
	require.NoError(t, hosted.CoreV1().Pods("default").Delete(ctx, "counter", metav1.DeleteOptions{}))
	restartAddons(t, hosted, nodeName)
	createProbe(t, hosted, nodeName, "counter-new", "--every=100ms", "--url=https://kubernetes.default.svc/api/v1/namespaces/default/pods?limit=1")
	// The probe's first count comes after 5s.
	time.Sleep(6 * time.Second)

	annotate(t, key, v1alpha1.DropOldServiceAccountKeyAnnotation, "true")
	waitRotation(t, key, 10*time.Minute, func(r *v1alpha1.KeyRotation) bool { return r == nil })
	total := time.Since(start)
	t.Logf("BENCH rotation_sa_key_signing_s %.3f s", signed.Seconds())
	t.Logf("BENCH rotation_sa_key_s %.3f s", total.Seconds())

	time.Sleep(6 * time.Second)
	clients.stop(t)
	requests, failed, failures = countedByProbe(t, hosted, "counter-new")
	t.Logf("from the pod with a token of the new key, across the drop of the old key: %d requests, %d failed", requests, failed)
	assert.Zero(t, failed, "requests that failed from the pod: %v", failures)
	assert.Greater(t, requests, 100, "the pod read throughout")

	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(ctx, key, hcp))
	assert.NotNil(t, hcp.Status.ServiceAccountKey.RotatedAt)
	assert.NotContains(t, hcp.Annotations, v1alpha1.DropOldServiceAccountKeyAnnotation, "the request was taken")
	assert.False(t, authenticated(t, hosted, oldToken), "a token of the old key is refused")
	assert.True(t, authenticated(t, hosted, newToken), "a token of the new key is accepted")
	assert.Equal(t, tokenKeyID(t, newToken), tokenKeyID(t, defaultToken(t, hosted)), "the new key signs")

	after, err := hosted.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, node.UID, after.UID, "the node was never registered again")
	require.NoError(t, cluster.NodeReady(after))
	eventually(t, 2*time.Minute, "kubectl exec reaches the pod through konnectivity", func() error {
		stdout, stderr, err := execIn(ctx, cfg, hosted, "counter-new", "/probe", "--version")
		if err != nil {
			return fmt.Errorf("exec: %w (stderr %q)", err, stderr)
		}
		if strings.TrimSpace(stdout) != "probe dev" {
			return fmt.Errorf("exec printed %q", stdout)
		}
		return nil
	})
}

// annotate sets an annotation on the HostedControlPlane at key, as
// kubectl annotate does.
func annotate(t *testing.T, key client.ObjectKey, name, value string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{name: value}}})
	require.NoError(t, err)
	hcp := &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	require.NoError(t, k8s.Patch(testContext(t), hcp, client.RawPatch(types.MergePatchType, patch)))
}

// waitRotation waits until the rotation of the service account key is
// done, saying which phase it is in meanwhile.
func waitRotation(t *testing.T, key client.ObjectKey, timeout time.Duration, done func(*v1alpha1.KeyRotation) bool) {
	t.Helper()
	eventually(t, timeout, "the rotation of the service account key", func() error {
		hcp := &v1alpha1.HostedControlPlane{}
		if err := k8s.Get(testContext(t), key, hcp); err != nil {
			return err
		}
		if done(hcp.Status.ServiceAccountKey.Rotation) {
			return nil
		}
		for _, c := range hcp.Status.Conditions {
			if c.Type == v1alpha1.ServiceAccountKeyReadyCondition {
				return fmt.Errorf("%s: %s", c.Reason, c.Message)
			}
		}
		return errors.New("no ServiceAccountKeyReady condition")
	})
}

// restartAddons restarts the add-ons in kube-system, as kubectl rollout
// restart does, and waits until each runs new pods again: their tokens are
// then signed by the new key.
func restartAddons(t *testing.T, hosted kubernetes.Interface, nodeName string) {
	t.Helper()
	ctx := testContext(t)
	patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339))
	for _, name := range []string{"konnectivity-agent", "coredns"} {
		_, err := hosted.AppsV1().Deployments("kube-system").Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err, name)
	}
	_, err := hosted.AppsV1().DaemonSets("kube-system").Patch(ctx, "kube-proxy", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	eventually(t, 5*time.Minute, "the add-ons restarted", func() error {
		for _, name := range []string{"konnectivity-agent", "coredns"} {
			d, err := hosted.AppsV1().Deployments("kube-system").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if done, how := readiness.DeploymentProgress(d); !done || d.Status.Replicas != ptr.Deref(d.Spec.Replicas, 1) {
				return fmt.Errorf("%s: %s", name, how)
			}
		}
		ds, err := hosted.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if done, how := readiness.DaemonSetProgress(ds); !done {
			return fmt.Errorf("kube-proxy: %s", how)
		}
		return readyPodOn(ctx, hosted, "kube-system", "k8s-app=konnectivity-agent", nodeName)
	})
}

// defaultToken is a token of the default service account of default, for
// an hour.
func defaultToken(t *testing.T, hosted kubernetes.Interface) string {
	t.Helper()
	tr, err := hosted.CoreV1().ServiceAccounts("default").CreateToken(testContext(t), "default",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// authenticated asks the API server whether token authenticates, as it
// decides for a request that bears it.
func authenticated(t *testing.T, hosted kubernetes.Interface, token string) bool {
	t.Helper()
	review, err := hosted.AuthenticationV1().TokenReviews().Create(testContext(t),
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return review.Status.Authenticated
}

// tokenKeyID is the key ID in a token's header, which names the key that
// signed it.
func tokenKeyID(t *testing.T, token string) string {
	t.Helper()
	header, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	require.NoError(t, err)
	var h struct {
		Kid string `json:"kid"`
	}
	require.NoError(t, json.Unmarshal(header, &h))
	require.NotEmpty(t, h.Kid)
	return h.Kid
}
