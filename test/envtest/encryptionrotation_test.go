package envtest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/encryption"
)

// rotatedSecrets is how many Secrets the workload cluster stores before its
// encryption key is rotated.
const rotatedSecrets = 30

// A rotation of the encryption key, asked for by the rotate annotation,
// walks its phases with a real kube-apiserver and etcd running each
// phase's configuration: the new key decrypts, then encrypts, every Secret
// is written again, the old key is dropped. Afterwards etcd holds every
// Secret under the new key's name and none under the old one's, each Secret
// written before reads back unchanged, the configuration holds the new key
// alone (the one before is kept beside it), and no key value shows in the
// status or an event. Each rollout is played as the Deployment controller
// and kubelet would: the API server process restarts with the new
// configuration, a pod of the new template replaces the old one.
func TestEncryptionKeyRotation(t *testing.T) {
	hosted(t)
	port := freePort(t)
	cluster, hcp := readyControlPlane(t, "erot", "v1.36.3", func(h *v1alpha1.HostedControlPlane) {
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(port)}
	})
	ns := hcp.Namespace
	etcd := runHostedEtcd(t, ns, "erot")
	api, _ := etcd.startAPIServer(t, port, nil)
	rollPodsOf(t, hcp, "erot-apiserver")
	setStatus(t, cluster, func(c *clusterv1.Cluster) { c.Status.Initialization.InfrastructureProvisioned = ptr.To(true) })
	waitCondition(t, hcp, v1alpha1.EncryptionReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	oldKey := get(t, &v1alpha1.HostedControlPlane{}, ns, "erot").Status.Encryption.Key
	require.NotEmpty(t, oldKey)

	kubeconfig := get(t, &corev1.Secret{}, ns, "erot-kubeconfig")
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig.Data["value"])
	require.NoError(t, err)
	workload, err := client.New(cfg, client.Options{Scheme: Scheme()})
	require.NoError(t, err)
	ctx := testContext(t)
	planted := "planted-" + strings.Repeat("y", 8)
	require.NoError(t, workload.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}))
	for i := range rotatedSecrets {
		require.NoError(t, workload.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: fmt.Sprintf("s-%02d", i)},
			Data:       map[string][]byte{"password": fmt.Appendf(nil, "%s-%02d", planted, i)},
		}))
	}
	assert.Equal(t, rotatedSecrets, storedUnder(t, etcd, oldKey), "stored with the old key")

	reasons := watchReasons(t, hcp, v1alpha1.EncryptionReadyCondition)
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Annotations[v1alpha1.RotateAnnotation] = "encryption-key"
	}))
	start := time.Now()

	newKey := waitEncryptionPhase(t, hcp, v1alpha1.DecryptingWithNewKey).Key
	keys := configuredKeys(t, ns)
	assert.Equal(t, oldKey, keys.Write, "the old key still encrypts")
	api = rollAPIServer(t, etcd, api, port, hcp)
	// The API server just started: on a busy machine its first handshakes
	// may time out.
	waitFor(t, "a Secret written while the new key only decrypts", func() error {
		err := workload.Create(testContext(t), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "while-decrypting"}, Data: map[string][]byte{"password": []byte(planted)},
		})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})

	waitEncryptionPhase(t, hcp, v1alpha1.EncryptingWithNewKey)
	assert.Equal(t, newKey, configuredKeys(t, ns).Write)
	api = rollAPIServer(t, etcd, api, port, hcp)

	waitEncryptionPhase(t, hcp, v1alpha1.DroppingOldKey)
	assert.Zero(t, storedUnder(t, etcd, oldKey), "every Secret was written again before the old key is dropped")
	keys = configuredKeys(t, ns)
	assert.Equal(t, []string{newKey}, keys.Names)
	_ = rollAPIServer(t, etcd, api, port, hcp)

	waitFor(t, "the rotation ends", func() error {
		cp := get(t, &v1alpha1.HostedControlPlane{}, ns, "erot")
		if cp.Status.Encryption.Rotation != nil || cp.Status.Encryption.RotatedAt == nil {
			return fmt.Errorf("status.encryption: %+v", cp.Status.Encryption)
		}
		return nil
	})
	t.Logf("BENCH rotation_encryption_key_envtest_s %.1f s", time.Since(start).Seconds())
	c := waitCondition(t, hcp, v1alpha1.EncryptionReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	assert.Contains(t, c.Message, newKey)

	ctx = testContext(t)
	stored := storedSecrets(t, etcd.client(t))
	prefix := []byte("k8s:enc:secretbox:v1:" + newKey + ":")
	for k, v := range stored {
		assert.True(t, bytes.HasPrefix(v, prefix), "%s is stored with the new key", k)
	}
	assert.Zero(t, storedUnder(t, etcd, oldKey))
	for i := range rotatedSecrets {
		s := &corev1.Secret{}
		require.NoError(t, workload.Get(ctx, client.ObjectKey{Namespace: "app", Name: fmt.Sprintf("s-%02d", i)}, s))
		require.Equal(t, fmt.Sprintf("%s-%02d", planted, i), string(s.Data["password"]))
	}
	s := &corev1.Secret{}
	require.NoError(t, workload.Get(ctx, client.ObjectKey{Namespace: "app", Name: "while-decrypting"}, s))
	assert.Equal(t, planted, string(s.Data["password"]))

	secret := get(t, &corev1.Secret{}, ns, "erot-encryption")
	assert.NotContains(t, secret.Annotations, v1alpha1.EncryptionRotationAnnotation)
	before, err := encryption.Read(secret.Data["before-"+newKey+".yaml"])
	require.NoError(t, err, "the keys before are kept for older snapshots")
	assert.Equal(t, []string{newKey}, before.Names[:1])
	assert.Contains(t, string(secret.Data["before-"+newKey+".yaml"]), oldKey)

	seen := strings.Join(reasons(), "\n")
	// EncryptionReady is written by the passes that reach the workload
	// cluster, which a phase spent restarting the API server may have none
	// of; status.encryption.rotation showed each phase above.
	assert.Contains(t, seen, string(v1alpha1.DroppingOldKey)+": rotating to secretbox key "+newKey, "EncryptionReady named the phase")
	events := &eventsv1.EventList{}
	require.NoError(t, env.Client.List(ctx, events, client.InNamespace(ns)))
	rewrote := false
	for _, e := range events.Items {
		rewrote = rewrote || e.Regarding.Name == "erot" && e.Action == "RewriteSecrets" &&
			strings.HasPrefix(e.Note, "every Secret of the workload cluster is stored with secretbox key "+newKey)
	}
	assert.True(t, rewrote, "an event counts the rewrite with the new key")
	final := fmt.Sprintf("%+v", get(t, &v1alpha1.HostedControlPlane{}, ns, "erot").Status)
	for _, line := range strings.Split(string(secret.Data["before-"+newKey+".yaml"]), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "secret: "); ok {
			assert.NotContains(t, seen, v)
			assert.NotContains(t, final, v)
		}
	}
}

// waitEncryptionPhase waits for the rotation of the encryption key to be in
// phase, and returns it.
func waitEncryptionPhase(t *testing.T, hcp *v1alpha1.HostedControlPlane, phase v1alpha1.RotationPhase) *v1alpha1.KeyRotation {
	t.Helper()
	var r *v1alpha1.KeyRotation
	waitFor(t, "phase "+string(phase), func() error {
		cp := get(t, &v1alpha1.HostedControlPlane{}, hcp.Namespace, hcp.Name)
		if r = cp.Status.Encryption.Rotation; r == nil || r.Phase != phase {
			return fmt.Errorf("status.encryption: %+v, %s; %s", r, conditionOf(cp, v1alpha1.EncryptionReadyCondition), conditionOf(cp, v1alpha1.APIServerReadyCondition))
		}
		return nil
	})
	return r
}

// configuredKeys are the keys of the control plane's encryption Secret.
func configuredKeys(t *testing.T, ns string) encryption.Keys {
	t.Helper()
	keys, err := encryption.Read(get(t, &corev1.Secret{}, ns, "erot-encryption").Data["encryption-config.yaml"])
	require.NoError(t, err)
	return keys
}

// storedUnder counts the Secrets etcd holds encrypted with key.
func storedUnder(t *testing.T, etcd *hostedEtcd, key string) int {
	t.Helper()
	n := 0
	for _, v := range storedSecrets(t, etcd.client(t)) {
		if bytes.HasPrefix(v, []byte("k8s:enc:secretbox:v1:"+key+":")) {
			n++
		}
	}
	return n
}

// rollAPIServer waits for the API servers' template to change, then plays
// their rollout: the process restarts with the new template, a pod of it
// replaces the old one.
func rollAPIServer(t *testing.T, etcd *hostedEtcd, running *Process, port int, hcp *v1alpha1.HostedControlPlane) *Process {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, env.Client.List(testContext(t), pods, client.InNamespace(hcp.Namespace), client.MatchingLabels{"app.kubernetes.io/name": "kube-apiserver"}))
	require.NotEmpty(t, pods.Items)
	was := pods.Items[0].Annotations["controlplane.cluster.x-k8s.io/secrets-hash"]
	waitFor(t, "the API servers' template follows the keys", func() error {
		if d := get(t, &appsv1.Deployment{}, hcp.Namespace, hcp.Name+"-apiserver"); d.Spec.Template.Annotations["controlplane.cluster.x-k8s.io/secrets-hash"] == was {
			return fmt.Errorf("the template still mounts the keys before")
		}
		return nil
	})
	return restartAPIServer(t, etcd, running, port)
}
