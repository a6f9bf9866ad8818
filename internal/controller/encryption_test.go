package controller

import (
	"context"
	"encoding/base64"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/encryption"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/probes"
)

// The first pass generates the key, labelled and with no owner; every later
// pass reads the same one, and the API servers' digest follows its content.
func TestEncryptionKeyIsGeneratedOnce(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(observedKinds()).Build()
	s := observedWith(t, c, controlPlane(nil))
	require.NotNil(t, s.keys)
	assert.Equal(t, encryption.Provider, s.keys.Provider)
	first := &corev1.Secret{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "demo-encryption"}, first))
	assert.Equal(t, "demo", first.Labels[contract.ControlPlaneLabel])
	assert.Empty(t, first.OwnerReferences, "not collected with the control plane")
	assert.Equal(t, contract.DataDigest(first.Data), s.in.SecretDigests["demo-encryption"])

	for range 3 {
		again := observedWith(t, c, controlPlane(nil))
		assert.Equal(t, s.keys, again.keys)
		now := &corev1.Secret{}
		require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(first), now))
		assert.Equal(t, first.Data, now.Data, "never generated again")
		assert.Equal(t, first.ResourceVersion, now.ResourceVersion, "not even written")
	}
}

// A Secret of the name that a user kept or copied, or that the deletion of
// a control plane of the same name kept, is adopted as it is.
func TestEncryptionKeyIsAdopted(t *testing.T) {
	data, err := encryption.NewRandomConfig(metav1.Now().Time)
	require.NoError(t, err)
	kept := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "demo-encryption",
			Annotations: map[string]string{v1alpha1.EncryptionKeyKeptAnnotation: "demo"},
		},
		Data: map[string][]byte{contract.EncryptionConfigKey: data},
	}
	c := fake.NewClientBuilder().WithScheme(observedKinds()).WithObjects(kept).Build()
	s := observedWith(t, c, controlPlane(nil))
	require.NotNil(t, s.keys)
	adopted := &corev1.Secret{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(kept), adopted))
	assert.Equal(t, data, adopted.Data[contract.EncryptionConfigKey], "its keys, untouched")
	assert.Equal(t, "demo", adopted.Labels[contract.ControlPlaneLabel])
	assert.NotContains(t, adopted.Annotations, v1alpha1.EncryptionKeyKeptAnnotation)
}

// A Secret the API servers could not encrypt with holds their phase, so
// that none rolls onto it, and the condition quotes none of it.
func TestInvalidEncryptionKeyHoldsTheAPIServers(t *testing.T) {
	planted := base64.StdEncoding.EncodeToString([]byte("planted-value-planted-value-0123"))
	bad := secret("demo-encryption", map[string][]byte{contract.EncryptionConfigKey: []byte(
		"apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - identity: {}\n  - secretbox: {keys: [{name: k, secret: " + planted + "}]}\n")})
	s := observed(t, controlPlane(nil), bad)
	assert.Nil(t, s.keys)
	out := s.held[v1alpha1.APIServerReadyCondition]
	assert.True(t, out.Warn)
	assert.Equal(t, v1alpha1.EncryptionConfigInvalidReason, out.Reason)
	assert.Contains(t, out.Message, "demo-encryption")
	assert.NotContains(t, out.Message, planted)
	assert.NotContains(t, out.Message, "planted")
}

// Deleting a control plane whose snapshots may exist keeps its key, marked;
// otherwise the key goes with it.
func TestEncryptionKeyOutlivesTheControlPlaneWithSnapshots(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*v1alpha1.HostedControlPlane)
		kept   bool
	}{
		"no backups":        {change: nil, kept: false},
		"backups":           {change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "@daily"} }, kept: true},
		"a stored snapshot": {change: func(h *v1alpha1.HostedControlPlane) { h.Status.Etcd.LastBackupKey = "ns/demo/x-rev1.db" }, kept: true},
		"restored":          {change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Restore = &v1alpha1.EtcdRestore{} }, kept: true},
	} {
		t.Run(name, func(t *testing.T) {
			hcp := controlPlane(tc.change)
			key := secret("demo-encryption", map[string][]byte{contract.EncryptionConfigKey: []byte("keys")})
			other := secret("demo-apiserver", nil)
			kinds := observedKinds()
			require.NoError(t, cmv1.AddToScheme(kinds))
			c := fake.NewClientBuilder().WithScheme(kinds).WithObjects(key, other).Build()
			r := &Reconciler{client: c, apiReader: c, recorder: events.NewFakeRecorder(10), etcd: etcd.NewChecker(), probes: probes.NewPool(1, probes.Answered[struct{}]), etcdAnswers: etcd.NewAnswers(1), etcdPresented: probes.NewPool(1, probes.Answered[struct{}])}
			cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo"}}
			_, err := r.reconcileDelete(t.Context(), &scope{hcp: hcp, cluster: cluster})
			require.NoError(t, err)
			left := &corev1.SecretList{}
			require.NoError(t, c.List(t.Context(), left))
			if !tc.kept {
				assert.Empty(t, left.Items)
				return
			}
			require.Len(t, left.Items, 1)
			assert.Equal(t, "demo-encryption", left.Items[0].Name)
			assert.Equal(t, "demo", left.Items[0].Annotations[v1alpha1.EncryptionKeyKeptAnnotation])
			assert.Equal(t, []byte("keys"), left.Items[0].Data[contract.EncryptionConfigKey])
		})
	}
}

// The rewrite waits for every API server to run with the key, and once it
// is done for the key and the last restore it asks the workload cluster
// nothing; a restore in place asks for another.
func TestRewriteRunsOncePerKeyAndRestore(t *testing.T) {
	lists := 0
	workload := fake.NewClientBuilder().WithScheme(observedKinds()).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists++
			return c.List(ctx, list, opts...)
		},
	}).Build()
	r := &Reconciler{recorder: events.NewFakeRecorder(10)}
	keys := &encryption.Keys{Provider: encryption.Provider, Write: "key-2", Names: []string{"key-2"}}
	hcp := controlPlane(nil)
	s := &scope{hcp: hcp, keys: keys, done: map[string]bool{}}
	more, err := r.rewriteSecrets(t.Context(), s, workload)
	require.NoError(t, err)
	assert.False(t, more)
	c := conditions.Get(hcp, v1alpha1.EncryptionReadyCondition)
	require.NotNil(t, c)
	assert.Equal(t, v1alpha1.WaitingReason, c.Reason)
	assert.Contains(t, c.Message, "waiting for every API server pod to run with secretbox key key-2")
	assert.Zero(t, lists)

	// The Deployment rolled out, but a terminating pod of the template
	// before may still write with the key before.
	s.done[v1alpha1.APIServerReadyCondition] = true
	_, err = r.rewriteSecrets(t.Context(), s, workload)
	require.NoError(t, err)
	assert.Zero(t, lists, "not while a pod of another template is left")

	hcp.Status.Encryption = v1alpha1.EncryptionStatus{Provider: encryption.Provider, Key: "key-2", RewrittenWith: "key-2"}
	s.apiServersRolled = true
	more, err = r.rewriteSecrets(t.Context(), s, workload)
	require.NoError(t, err)
	assert.False(t, more)
	assert.True(t, conditions.IsTrue(hcp, v1alpha1.EncryptionReadyCondition))
	assert.Nil(t, s.rewritten, "nothing new to record")
	assert.Zero(t, lists, "a rewrite done costs no request")

	hcp.Status.Etcd.RestoredFrom = &v1alpha1.EtcdRestoredFrom{Key: "ns/demo/x-rev1.db", Revision: 1, ID: "20261125T220000Z"}
	_, err = r.rewriteSecrets(t.Context(), s, workload)
	require.NoError(t, err)
	assert.Equal(t, 1, lists, "a restore in place asks for a rewrite")
	require.NotNil(t, s.rewritten)
	assert.Equal(t, "20261125T220000Z", s.rewritten.after)
	assert.Equal(t, "key-2", s.rewritten.key)
}
