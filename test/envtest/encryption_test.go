package envtest

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/encryption"
)

// plaintextSecrets is how many Secrets the workload cluster stores in clear
// before its API server encrypts: more than two pages of a rewrite.
const plaintextSecrets = 2*encryption.PageSize + 50

// A workload cluster whose API server stored its Secrets in clear (as one
// of a release before encryption at rest) gets them encrypted: once its API
// server runs with the encryption configuration the controller generated,
// the controller rewrites every Secret, a page at a time, EncryptionReady
// counting them, until etcd holds none in clear; each reads back unchanged,
// and what is written afterwards is encrypted at once.
func TestEncryptionAtRest(t *testing.T) {
	hosted(t)
	ctx := testContext(t)
	port := freePort(t)
	cluster, hcp := readyControlPlane(t, "crypt", "v1.36.3", func(h *v1alpha1.HostedControlPlane) {
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(port)}
	})
	ns := hcp.Namespace
	key := get(t, &corev1.Secret{}, ns, "crypt-encryption")
	etcd := runHostedEtcd(t, ns, "crypt")

	// The API server of a release before this one: no encryption flag.
	old, _ := etcd.startAPIServer(t, port, func(arg string) bool { return strings.HasPrefix(arg, "--encryption-provider-config") })
	kubeconfig := get(t, &corev1.Secret{}, ns, "crypt-kubeconfig")
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig.Data["value"])
	require.NoError(t, err)
	cfg.QPS, cfg.Burst = 200, 200
	waitAnswers(t, cfg)
	workload, err := client.New(cfg, client.Options{Scheme: Scheme()})
	require.NoError(t, err)
	planted := "planted-" + strings.Repeat("x", 8)
	require.NoError(t, workload.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}))
	for i := range plaintextSecrets {
		require.NoError(t, workload.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: fmt.Sprintf("s-%03d", i)},
			Data:       map[string][]byte{"password": fmt.Appendf(nil, "%s-%03d", planted, i)},
		}))
	}
	stored := storedSecrets(t, etcd.client(t))
	assert.GreaterOrEqual(t, inClear(stored, planted), plaintextSecrets, "the old API server stored them in clear")

	// The rollout: the API server runs with the Deployment's flags.
	require.NoError(t, old.Stop(20*time.Second))
	etcd.startAPIServer(t, port, nil)
	runningPod(t, hcp, "crypt-apiserver-a", "v1.36.3")
	waitCondition(t, hcp, v1alpha1.AvailableCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	// Until the workload cluster is reached, nothing is rewritten.
	assert.Equal(t, plaintextSecrets, inClear(storedSecrets(t, etcd.client(t)), planted))

	reasons := watchReasons(t, hcp, v1alpha1.EncryptionReadyCondition)
	setStatus(t, cluster, func(c *clusterv1.Cluster) { c.Status.Initialization.InfrastructureProvisioned = ptr.To(true) })
	c := waitCondition(t, hcp, v1alpha1.EncryptionReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	seen := reasons()
	page := v1alpha1.RewritingSecretsReason + ": rewriting the Secrets stored before secretbox key " + hcp.Status.Encryption.Key +
		fmt.Sprintf(" took over: %d checked so far, %d of them written again", encryption.PageSize, encryption.PageSize)
	assert.Contains(t, seen, page, "EncryptionReady counted the pages")
	assert.Contains(t, c.Message, "every Secret stored before was rewritten with it")

	// Cluster API's patch helper writes the conditions before the rest of
	// the status.
	waitFor(t, "status.encryption says what was rewritten", func() error {
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp); err != nil {
			return err
		}
		if e := hcp.Status.Encryption; e.RewrittenWith == "" || e.RewrittenWith != e.Key {
			return fmt.Errorf("status.encryption: %+v", e)
		}
		return nil
	})
	st := hcp.Status.Encryption
	assert.Equal(t, encryption.Provider, st.Provider)
	assert.True(t, strings.HasPrefix(st.Key, "key-"), st.Key)
	assert.Equal(t, st.Key, st.RewrittenWith)
	assert.Empty(t, st.RewrittenAfter)

	ctx = testContext(t) // each step above may take minutes on a busy machine
	stored = storedSecrets(t, etcd.client(t))
	assert.Zero(t, inClear(stored, planted), "no planted value in clear in etcd")
	prefix := []byte("k8s:enc:secretbox:v1:" + st.Key + ":")
	for k, v := range stored {
		assert.True(t, bytes.HasPrefix(v, prefix), "%s is stored encrypted with %s", k, st.Key)
	}
	for i := range plaintextSecrets {
		s := &corev1.Secret{}
		require.NoError(t, workload.Get(ctx, client.ObjectKey{Namespace: "app", Name: fmt.Sprintf("s-%03d", i)}, s))
		require.Equal(t, fmt.Sprintf("%s-%03d", planted, i), string(s.Data["password"]))
	}
	require.NoError(t, workload.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "after"},
		Data:       map[string][]byte{"password": []byte(planted + "-after")},
	}))
	after, err := etcd.client(t).Get(ctx, "/registry/secrets/app/after")
	require.NoError(t, err)
	require.Len(t, after.Kvs, 1)
	assert.True(t, bytes.HasPrefix(after.Kvs[0].Value, prefix), "written encrypted at once")

	events := &eventsv1.EventList{}
	require.NoError(t, env.Client.List(ctx, events, client.InNamespace(ns)))
	var notes []string
	for _, e := range events.Items {
		if e.Regarding.Name == hcp.Name && (e.Action == "RewriteSecrets" || e.Action == "GenerateEncryptionKey") {
			notes = append(notes, e.Note)
		}
	}
	assert.Len(t, notes, 2, "one key generated, one rewrite: %q", notes)
	rewrote := fmt.Sprintf("every Secret of the workload cluster is stored with secretbox key %s: ", st.Key)
	found := false
	for _, n := range notes {
		if strings.HasPrefix(n, rewrote) {
			found = true
			var checked, written int
			_, err := fmt.Sscanf(strings.TrimPrefix(n, rewrote), "%d checked, %d of them written again", &checked, &written)
			require.NoError(t, err, n)
			assert.GreaterOrEqual(t, written, plaintextSecrets, n)
			assert.GreaterOrEqual(t, checked, written, n)
		}
	}
	assert.True(t, found, "an event counts the rewrite: %q", notes)

	// No value of the key is shown anywhere: not in the status, not in an
	// event.
	keyData := key.Data["encryption-config.yaml"]
	secretLine := ""
	for line := range strings.SplitSeq(string(keyData), "\n") {
		if strings.Contains(line, "secret:") {
			secretLine = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "secret:"))
		}
	}
	require.NotEmpty(t, secretLine)
	status := fmt.Sprintf("%+v", hcp.Status)
	assert.NotContains(t, status, secretLine)
	for _, e := range events.Items {
		assert.NotContains(t, e.Note, secretLine)
	}
}

// storedSecrets are the values etcd holds under the API server's Secrets.
func storedSecrets(t *testing.T, c *clientv3.Client) map[string][]byte {
	t.Helper()
	resp, err := c.Get(testContext(t), "/registry/secrets/", clientv3.WithPrefix())
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = kv.Value
	}
	return out
}

// inClear counts the stored values that hold planted in clear.
func inClear(stored map[string][]byte, planted string) int {
	n := 0
	for _, v := range stored {
		if bytes.Contains(v, []byte(planted)) {
			n++
		}
	}
	return n
}

// watchReasons polls the control plane's condition until the test ends and
// returns a function that lists each reason and message it took, in order.
func watchReasons(t *testing.T, hcp *v1alpha1.HostedControlPlane, condition string) func() []string {
	t.Helper()
	var (
		mu   sync.Mutex
		seen []string
	)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		cp := &v1alpha1.HostedControlPlane{}
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), cp) != nil {
				continue
			}
			if c := conditions.Get(cp, condition); c != nil {
				mu.Lock()
				if s := c.Reason + ": " + c.Message; len(seen) == 0 || seen[len(seen)-1] != s {
					seen = append(seen, s)
				}
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}
