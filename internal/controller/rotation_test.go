package controller

import (
	"strings"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/encryption"
)

// The rotate annotation starts a rotation of each key it names, tells what
// it does not know in a Warning event that names the annotation, and goes
// once the status records the rotations; the encryption key's rotation is
// recorded on its Secret with the keys that decrypt, and no key shows in an
// event.
func TestRotateRequests(t *testing.T) {
	hcp := controlPlane(func(h *v1alpha1.HostedControlPlane) {
		h.Annotations = map[string]string{v1alpha1.RotateAnnotation: "service-account-key, kubelet-ca,encryption-key"}
	})
	kinds := observedKinds()
	require.NoError(t, cmv1.AddToScheme(kinds))
	c := fake.NewClientBuilder().WithScheme(kinds).WithObjects(hcp).WithStatusSubresource(hcp).Build()
	recorder := events.NewFakeRecorder(20)
	r := &Reconciler{client: c, apiReader: c, settings: render.DefaultSettings(), recorder: recorder}
	s := observedWith(t, c, hcp)
	require.NotNil(t, s.encryptionSecret)
	before := s.encryptionSecret.Data[contract.EncryptionConfigKey]

	r.takeRotations(t.Context(), s)
	require.NotNil(t, hcp.Status.ServiceAccountKey.Rotation)
	assert.Equal(t, v1alpha1.TrustingNewKey, hcp.Status.ServiceAccountKey.Rotation.Phase)
	rot := hcp.Status.Encryption.Rotation
	require.NotNil(t, rot)
	assert.Equal(t, v1alpha1.DecryptingWithNewKey, rot.Phase)
	assert.Contains(t, hcp.Annotations, v1alpha1.RotateAnnotation, "kept until the status that records the rotations is stored")

	stored := &corev1.Secret{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "demo-encryption"}, stored))
	keys, err := encryption.Read(stored.Data[contract.EncryptionConfigKey])
	require.NoError(t, err)
	assert.Len(t, keys.Names, 1, "the first provider still encrypts with the old key alone")
	assert.Contains(t, string(stored.Data[contract.EncryptionConfigKey]), rot.Key, "the new key decrypts")
	recorded, err := encryptionRotationOf(stored)
	require.NoError(t, err)
	assert.Equal(t, rot.Key, recorded.Key)

	var told []string
	for len(recorder.Events) > 0 {
		told = append(told, <-recorder.Events)
	}
	all := strings.Join(told, "\n")
	assert.Contains(t, all, `Warning RotationRequestInvalid metadata.annotations[controlplane.cluster.x-k8s.io/rotate]: "kubelet-ca" cannot be rotated; it must be a comma-separated list of service-account-key, encryption-key`)
	for line := range strings.SplitSeq(string(stored.Data[contract.EncryptionConfigKey])+string(before), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "secret: "); ok {
			assert.NotContains(t, all, v)
		}
	}

	// The next pass finds both rotations under way: the request was taken.
	r.takeRotations(t.Context(), s)
	assert.NotContains(t, hcp.Annotations, v1alpha1.RotateAnnotation)
}

// A phase moves on only once every pod, terminating ones too, takes exactly
// the service account key flags of the phase.
func TestPodsRun(t *testing.T) {
	pod := func(args ...string) corev1.Pod {
		return corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-apiserver", Args: append([]string{"--v=2"}, args...)}}}}
	}
	both := []string{"--service-account-key-file=/a", "--service-account-key-file=/b", "--service-account-signing-key-file=/a"}
	assert.True(t, podsRun([]corev1.Pod{pod(both...), pod(both...)}, "kube-apiserver", both))
	assert.False(t, podsRun([]corev1.Pod{pod(both...), pod("--service-account-key-file=/a", "--service-account-signing-key-file=/a")}, "kube-apiserver", both),
		"a pod of the template before is left")
	assert.False(t, podsRun(nil, "kube-apiserver", both), "no pod runs it")
}

// The annotation that drops the old service account key stays until the
// stored rotation dropped it, and goes at once, told in a Warning event,
// when no rotation of the key is under way or asked for.
func TestDropOldKeyTaken(t *testing.T) {
	for _, tc := range []struct {
		name     string
		phase    v1alpha1.RotationPhase // "" for no rotation
		rotate   string
		kept     bool
		warnings int
	}{
		{"while the API servers roll to trust the new key", v1alpha1.TrustingNewKey, "", true, 0},
		{"while the wait runs", v1alpha1.WaitingForOldTokens, "", true, 0},
		{"once the old key is being dropped", v1alpha1.DroppingOldKey, "", false, 0},
		{"asked for with the rotation", "", "encryption-key,service-account-key", true, 0},
		{"no rotation", "", "", false, 1},
		{"only another key's rotation asked for", "", "encryption-key", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hcp := &v1alpha1.HostedControlPlane{}
			hcp.Annotations = map[string]string{v1alpha1.DropOldServiceAccountKeyAnnotation: "true"}
			if tc.rotate != "" {
				hcp.Annotations[v1alpha1.RotateAnnotation] = tc.rotate
			}
			var current *v1alpha1.KeyRotation
			if tc.phase != "" {
				current = &v1alpha1.KeyRotation{Phase: tc.phase}
			}
			recorder := events.NewFakeRecorder(5)
			(&Reconciler{recorder: recorder}).takeDropOldKey(&scope{hcp: hcp}, current)
			_, kept := hcp.Annotations[v1alpha1.DropOldServiceAccountKeyAnnotation]
			assert.Equal(t, tc.kept, kept)
			require.Len(t, recorder.Events, tc.warnings)
			if tc.warnings > 0 {
				assert.Contains(t, <-recorder.Events, "Warning RotationRequestInvalid metadata.annotations[controlplane.cluster.x-k8s.io/drop-old-service-account-key]: no rotation of the service account key is under way")
			}
		})
	}
}

// In DroppingOldCA the new CA's key is written into the CA's Secret only
// once every certificate is issued for its spec: the same phase changes the
// issuer of a CA never rotated to the self-signed one, and a key written
// while cert-manager issues for that can fail the issuance.
func TestNewCAKeyWaitsForTheIssuerChange(t *testing.T) {
	now := metav1.Now()
	hcp := controlPlane(func(h *v1alpha1.HostedControlPlane) {
		h.Status.CertificateAuthorities.FrontProxy.Rotation = &v1alpha1.KeyRotation{Phase: v1alpha1.DroppingOldCA, Since: now, StartedAt: now}
	})
	old := secret("demo-proxy", map[string][]byte{corev1.TLSPrivateKeyKey: []byte("old key")})
	next := secret("demo-proxy-next", map[string][]byte{corev1.TLSPrivateKeyKey: []byte("new key")})
	kinds := observedKinds()
	require.NoError(t, cmv1.AddToScheme(kinds))
	c := fake.NewClientBuilder().WithScheme(kinds).WithObjects(hcp, old, next).WithStatusSubresource(hcp).Build()
	recorder := events.NewFakeRecorder(20)
	r := &Reconciler{client: c, apiReader: c, settings: render.DefaultSettings(), recorder: recorder}
	s := observedWith(t, c, hcp)
	s.done = map[string]bool{}
	proxy, ok := authorityKindOf(v1alpha1.RotateFrontProxyCA)
	require.True(t, ok)
	held := func() string {
		got := &corev1.Secret{}
		require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(old), got))
		return string(got.Data[corev1.TLSPrivateKeyKey])
	}

	r.rotateAuthority(t.Context(), s, proxy)
	assert.Equal(t, "old key", held(), "not while a certificate is still issued for its spec")
	assert.Equal(t, v1alpha1.DroppingOldCA, hcp.Status.CertificateAuthorities.FrontProxy.Rotation.Phase)
	assert.Positive(t, s.soon, "the pass comes back")

	s.done[v1alpha1.CertificatesReadyCondition] = true
	r.rotateAuthority(t.Context(), s, proxy)
	assert.Equal(t, "new key", held(), "written once every certificate is issued")
	var told []string
	for len(recorder.Events) > 0 {
		told = append(told, <-recorder.Events)
	}
	assert.Contains(t, strings.Join(told, "\n"), "wrote the key of the new front proxy CA into Secret demo-proxy")
}
