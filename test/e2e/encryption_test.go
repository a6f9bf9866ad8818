package e2e

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// plantedSecret is a Secret of the workload cluster whose value is random,
// so that finding it anywhere means it was stored in clear.
type plantedSecret struct {
	value string
	// key names the encryption key of the control plane that stored it.
	key string
}

// plantedSecretName is the planted Secret, in the namespace default.
const plantedSecretName = "planted"

// plantSecret creates the planted Secret through the Cluster's kubeconfig.
func plantSecret(t *testing.T, key client.ObjectKey) plantedSecret {
	hosted, err := kubernetes.NewForConfig(hostedConfig(t, key.Namespace, key.Name))
	require.NoError(t, err)
	p := plantedSecret{value: "planted-" + randomHex(t)}
	_, err = hosted.CoreV1().Secrets("default").Create(testContext(t), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: plantedSecretName},
		Data:       map[string][]byte{"password": []byte(p.value)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return p
}

// encryptedIn checks that a snapshot holds the planted Secret, stored
// encrypted with secretbox, and its value nowhere in clear.
func (p plantedSecret) encryptedIn(t *testing.T, snapshot []byte) {
	assert.False(t, bytes.Contains(snapshot, []byte(p.value)), "the planted value is in the snapshot in clear")
	found := false
	for _, kv := range snapshotKeys(t, snapshot) {
		if string(kv.Key) == "/registry/secrets/default/"+plantedSecretName {
			found = true
			assert.True(t, strings.HasPrefix(string(kv.Value), "k8s:enc:secretbox:v1:key-"), "stored as %.30q", kv.Value)
		}
	}
	require.True(t, found, "the snapshot holds the planted Secret")
}

// readBack reads the planted Secret through the kubeconfig of the Cluster
// restored from a snapshot, with its value, and checks that its control
// plane encrypts with the key of the one that stored it.
func (p plantedSecret) readBack(t *testing.T, key client.ObjectKey) {
	hosted, err := kubernetes.NewForConfig(hostedConfig(t, key.Namespace, key.Name))
	require.NoError(t, err)
	s, err := hosted.CoreV1().Secrets("default").Get(testContext(t), plantedSecretName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, p.value, string(s.Data["password"]))
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(testContext(t), key, hcp))
	assert.Equal(t, p.key, hcp.Status.Encryption.Key, "the kept key was adopted")
	secret := &corev1.Secret{}
	require.NoError(t, k8s.Get(testContext(t), client.ObjectKey{Namespace: key.Namespace, Name: key.Name + "-encryption"}, secret))
	assert.NotContains(t, secret.Annotations, v1alpha1.EncryptionKeyKeptAnnotation, "in use again")
}

// encryptionKeyKept checks that deleting the Cluster, whose snapshots are in
// the store, kept its encryption key Secret, marked as kept, with the key
// its control plane wrote with.
func encryptionKeyKept(t *testing.T, key client.ObjectKey, keyName string) {
	require.NotEmpty(t, keyName, "status.encryption.key")
	secret := &corev1.Secret{}
	require.NoError(t, k8s.Get(testContext(t), client.ObjectKey{Namespace: key.Namespace, Name: key.Name + "-encryption"}, secret))
	assert.Equal(t, key.Name, secret.Annotations[v1alpha1.EncryptionKeyKeptAnnotation])
	assert.Empty(t, secret.OwnerReferences)
	assert.Contains(t, string(secret.Data["encryption-config.yaml"]), "name: "+keyName)
}
