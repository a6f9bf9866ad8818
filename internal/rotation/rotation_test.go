package rotation

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

func TestRequests(t *testing.T) {
	keys, unknown := Requests("service-account-key, encryption-key,service-account-key")
	assert.Equal(t, []string{"service-account-key", "encryption-key"}, keys)
	assert.Empty(t, unknown)
	keys, unknown = Requests("service-account-key,cluster-ca,etcd-ca,kubelet-ca,")
	assert.Equal(t, []string{"service-account-key", "cluster-ca", "etcd-ca"}, keys)
	assert.Equal(t, []string{"kubelet-ca", ""}, unknown)
	keys, unknown = Requests("etcd-ca, emergency")
	assert.Equal(t, []string{"etcd-ca", "service-account-key", "encryption-key", "front-proxy-ca"}, keys, "emergency names every key but the cluster CA")
	assert.Empty(t, unknown)
}

// A rotation of the service account key moves one phase at a time, each
// only once the pods run what it renders; the old key is dropped only after
// the longest token lifetime since the last pod stopped signing with it,
// and only once its Secret holds the new key.
func TestServiceAccountKeyPhases(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	life := 24 * time.Hour
	r := Start(v1alpha1.TrustingNewKey, t0)
	assert.Equal(t, t0, r.StartedAt.Time)

	step := ServiceAccountKey(r, ServiceAccountObserved{MaxTokenLifetime: life}, t0.Add(time.Minute))
	assert.Equal(t, r, step.Next, "the API servers have not all rolled")
	assert.Contains(t, step.Message, "roll to trust the new key as well as the old")

	t1 := t0.Add(3 * time.Minute)
	step = ServiceAccountKey(r, ServiceAccountObserved{Rolled: true, MaxTokenLifetime: life}, t1)
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.SigningWithNewKey, step.Next.Phase)
	assert.Equal(t, t1, step.Next.Since.Time)
	assert.Equal(t, t0, step.Next.StartedAt.Time, "when it was asked for stays")
	assert.Equal(t, v1alpha1.TrustingNewKey, r.Phase, "the status read is not changed in place")
	r = step.Next

	step = ServiceAccountKey(r, ServiceAccountObserved{MaxTokenLifetime: life}, t1.Add(time.Minute))
	assert.Equal(t, r, step.Next)

	t2 := t1.Add(4 * time.Minute)
	step = ServiceAccountKey(r, ServiceAccountObserved{Rolled: true, MaxTokenLifetime: life}, t2)
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.WaitingForOldTokens, step.Next.Phase)
	assert.Equal(t, t2, step.Next.Since.Time)
	assert.Equal(t, life, step.Wake, "looks again when the last token has expired")
	assert.Contains(t, step.Message, "trusted until 2026-11-27T05:07:00Z")
	assert.False(t, step.Replace)
	r = step.Next

	step = ServiceAccountKey(r, ServiceAccountObserved{Rolled: true, MaxTokenLifetime: life}, t2.Add(life-time.Second))
	assert.Equal(t, r, step.Next, "a second before the last token expires, the old key is still trusted")
	assert.Equal(t, time.Second, step.Wake)

	t3 := t2.Add(life)
	step = ServiceAccountKey(r, ServiceAccountObserved{Rolled: true, MaxTokenLifetime: life}, t3)
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.DroppingOldKey, step.Next.Phase)
	assert.True(t, step.Replace)
	r = step.Next

	// Until <cluster>-sa holds the new key, the pods keep both (the
	// rendering of the phase before), which counts as rolled: the copy is
	// asked for again.
	step = ServiceAccountKey(r, ServiceAccountObserved{Rolled: true, MaxTokenLifetime: life}, t3.Add(time.Second))
	assert.Equal(t, r, step.Next)
	assert.True(t, step.Replace)

	step = ServiceAccountKey(r, ServiceAccountObserved{Replaced: true, MaxTokenLifetime: life}, t3.Add(2*time.Second))
	assert.Equal(t, r, step.Next, "the API servers roll to trust the new key alone")
	assert.False(t, step.Replace)

	step = ServiceAccountKey(r, ServiceAccountObserved{Replaced: true, Rolled: true, MaxTokenLifetime: life}, t3.Add(time.Minute))
	assert.Nil(t, step.Next, "the rotation ended")
}

// A shorter lifetime set in the API servers' args shortens the wait.
func TestServiceAccountKeyWaitFollowsTheLifetime(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	r := Start(v1alpha1.TrustingNewKey, t0)
	r.Phase = v1alpha1.WaitingForOldTokens
	step := ServiceAccountKey(r, ServiceAccountObserved{Rolled: true, MaxTokenLifetime: time.Hour}, t0.Add(time.Hour))
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.DroppingOldKey, step.Next.Phase)
}

// A rotation of the encryption key moves on only once every API server runs
// the configuration of its phase, and drops the old key only once every
// Secret was written again with the new one.
func TestEncryptionKeyPhases(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	r := Start(v1alpha1.DecryptingWithNewKey, t0)
	r.Key = "key-20261126T050000Z"

	step := EncryptionKey(r, EncryptionObserved{Rewritten: true}, t0.Add(time.Minute))
	assert.Equal(t, r, step.Next, "not before every API server decrypts with the new key")
	step = EncryptionKey(r, EncryptionObserved{Rolled: true}, t0.Add(2*time.Minute))
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.EncryptingWithNewKey, step.Next.Phase)
	assert.Equal(t, r.Key, step.Next.Key)
	r = step.Next

	step = EncryptionKey(r, EncryptionObserved{Rewritten: true}, t0.Add(3*time.Minute))
	assert.Equal(t, r, step.Next, "a rewrite counts only once every API server encrypts with the new key")
	step = EncryptionKey(r, EncryptionObserved{Rolled: true}, t0.Add(4*time.Minute))
	assert.Equal(t, r, step.Next, "not before every Secret was rewritten")
	assert.Contains(t, step.Message, "EncryptionReady counts them")
	step = EncryptionKey(r, EncryptionObserved{Rolled: true, Rewritten: true}, t0.Add(5*time.Minute))
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.DroppingOldKey, step.Next.Phase)
	r = step.Next

	step = EncryptionKey(r, EncryptionObserved{Rewritten: true}, t0.Add(6*time.Minute))
	assert.Equal(t, r, step.Next)
	step = EncryptionKey(r, EncryptionObserved{Rolled: true, Rewritten: true}, t0.Add(7*time.Minute))
	assert.Nil(t, step.Next, "the rotation ended")
}

// Asked to drop the old key, a rotation ends the wait for its tokens at
// once, or skips it when it gets there; never sooner.
func TestServiceAccountKeyWaitEndedByTheUser(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	life := 24 * time.Hour
	r := Start(v1alpha1.TrustingNewKey, t0)
	step := ServiceAccountKey(r, ServiceAccountObserved{Rolled: false, MaxTokenLifetime: life, DropOldKey: true}, t0.Add(time.Minute))
	assert.Equal(t, r, step.Next, "the API servers trust the new key first")
	step = ServiceAccountKey(r, ServiceAccountObserved{Rolled: true, MaxTokenLifetime: life, DropOldKey: true}, t0.Add(time.Minute))
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.SigningWithNewKey, step.Next.Phase, "and every pod signs with it before the old one goes")
	assert.False(t, step.Replace)

	r.Phase = v1alpha1.SigningWithNewKey
	step = ServiceAccountKey(r, ServiceAccountObserved{Rolled: true, MaxTokenLifetime: life, DropOldKey: true}, t0.Add(2*time.Minute))
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.DroppingOldKey, step.Next.Phase, "no wait once nothing signs with the old key")
	assert.True(t, step.Replace)
	assert.Contains(t, step.Message, "the old key is dropped before its tokens expired, as controlplane.cluster.x-k8s.io/drop-old-service-account-key asked")

	r.Phase = v1alpha1.WaitingForOldTokens
	step = ServiceAccountKey(r, ServiceAccountObserved{Rolled: true, MaxTokenLifetime: life, DropOldKey: true}, t0.Add(time.Hour))
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.DroppingOldKey, step.Next.Phase, "the wait ends")
	assert.Equal(t, t0.Add(time.Hour), step.Next.Since.Time)
	assert.Zero(t, step.Wake)
}

// A rotation of a certificate authority moves on only once every pod runs
// what its phase renders, asks to write the new CA into the CA's Secret
// only in a pass that rendered DroppingOldCA, and ends only once the Secret
// holds it and everything rolled to trust it alone.
func TestAuthorityPhases(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	r := Start(v1alpha1.TrustingNewCA, t0)

	step := Authority(r, AuthorityObserved{Replaced: true}, t0.Add(time.Minute))
	assert.Equal(t, r, step.Next, "not before everything trusts both CAs")
	assert.False(t, step.Replace)
	step = Authority(r, AuthorityObserved{Rolled: true}, t0.Add(2*time.Minute))
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.IssuingFromNewCA, step.Next.Phase)
	assert.Equal(t, t0.Add(2*time.Minute), step.Next.Since.Time)
	assert.Equal(t, v1alpha1.TrustingNewCA, r.Phase, "the status read is not changed in place")
	r = step.Next

	step = Authority(r, AuthorityObserved{}, t0.Add(3*time.Minute))
	assert.Equal(t, r, step.Next, "not before every certificate is issued by the new CA and in use")
	step = Authority(r, AuthorityObserved{Rolled: true}, t0.Add(4*time.Minute))
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.DroppingOldCA, step.Next.Phase)
	assert.False(t, step.Replace, "the pass rendered IssuingFromNewCA: the CA's own Certificate is not self-signed yet")
	r = step.Next

	step = Authority(r, AuthorityObserved{Rolled: true}, t0.Add(5*time.Minute))
	assert.Equal(t, r, step.Next)
	assert.True(t, step.Replace)
	step = Authority(r, AuthorityObserved{Replaced: true}, t0.Add(6*time.Minute))
	assert.Equal(t, r, step.Next, "everything rolls to trust the new CA alone")
	assert.False(t, step.Replace)
	step = Authority(r, AuthorityObserved{Replaced: true, Rolled: true}, t0.Add(7*time.Minute))
	assert.Nil(t, step.Next, "the rotation ended")
}

// The cluster CA waits, once everything is issued by the new CA, until no
// kubelet can present a client certificate of the old one: at once when
// the workload cluster has no node, otherwise for the longest lifetime of
// one after the controller manager stopped signing with the old CA.
func TestClusterAuthorityWaitsForKubelets(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	year := 365 * 24 * time.Hour
	issuing := enter(Start(v1alpha1.TrustingNewCA, t0), v1alpha1.IssuingFromNewCA, t0)
	nodes := &KubeletsObserved{Nodes: []string{"a", "b"}, Lifetime: year}

	step := Authority(issuing, AuthorityObserved{Rolled: true, Kubelets: nodes}, t0.Add(time.Minute))
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.WaitingForKubelets, step.Next.Phase)
	assert.Equal(t, KubeletsPoll, step.Wake, "back to look for renewals, which no watch reports")
	assert.Contains(t, step.Message, "0 of 2 nodes")
	waiting := step.Next

	step = Authority(waiting, AuthorityObserved{Kubelets: nodes}, t0.Add(2*time.Minute))
	assert.Equal(t, waiting, step.Next, "not while a pod does not run what the phase renders")
	step = Authority(waiting, AuthorityObserved{Rolled: true, Kubelets: nodes}, t0.Add(time.Minute+year-time.Second))
	assert.Equal(t, waiting, step.Next, "a kubelet may still present a certificate of the old CA")
	assert.Equal(t, time.Second, step.Wake, "back when the last client certificate of the old CA has expired")
	step = Authority(waiting, AuthorityObserved{Rolled: true, Kubelets: nodes}, t0.Add(time.Minute+year))
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.DroppingOldCA, step.Next.Phase, "the lifetime has passed, though no node was seen renewing")
	assert.Contains(t, step.Message, "0 of 2 nodes were seen renewing")
	assert.False(t, step.Replace, "the pass rendered WaitingForKubelets")

	step = Authority(issuing, AuthorityObserved{Rolled: true, Kubelets: &KubeletsObserved{Lifetime: year}}, t0.Add(time.Minute))
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.DroppingOldCA, step.Next.Phase, "no node: nothing to wait for")
	assert.Contains(t, step.Message, "no node")
}

// The wait ends once every node of the workload cluster has been seen
// with a client certificate of the new CA, across passes that each see
// some (the requests are removed an hour after they were issued), and only
// the nodes the workload cluster still has count.
func TestClusterAuthorityFollowsKubeletRenewals(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	year := 365 * 24 * time.Hour
	waiting := enter(Start(v1alpha1.TrustingNewCA, t0), v1alpha1.WaitingForKubelets, t0)
	pass := func(r *v1alpha1.KeyRotation, nodes, renewed []string) Step {
		return Authority(r, AuthorityObserved{Rolled: true, Kubelets: &KubeletsObserved{Nodes: nodes, Renewed: renewed, Lifetime: year}}, t0.Add(time.Hour))
	}

	step := pass(waiting, []string{"a", "b", "c"}, []string{"b", "gone", "b"})
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.WaitingForKubelets, step.Next.Phase)
	assert.Equal(t, []string{"b"}, step.Next.RenewedNodes, "each node once, of the nodes there are")
	assert.Contains(t, step.Message, "1 of 3 nodes")
	assert.Equal(t, KubeletsPoll, step.Wake)
	assert.Empty(t, waiting.RenewedNodes, "the rotation the pass read is not changed")

	step = pass(step.Next, []string{"a", "b", "c"}, []string{"c"})
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.WaitingForKubelets, step.Next.Phase)
	assert.Equal(t, []string{"b", "c"}, step.Next.RenewedNodes, "b's request was removed meanwhile; the record keeps it")
	assert.Contains(t, step.Message, "2 of 3 nodes")

	removed := pass(step.Next, []string{"a", "c"}, nil)
	require.NotNil(t, removed.Next)
	assert.Equal(t, []string{"c"}, removed.Next.RenewedNodes, "b was removed from the workload cluster")
	assert.Contains(t, removed.Message, "1 of 2 nodes")

	step = pass(step.Next, []string{"a", "b", "c"}, []string{"a"})
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.DroppingOldCA, step.Next.Phase, "every node renewed, long before the lifetime has passed")
	assert.Equal(t, []string{"a", "b", "c"}, step.Next.RenewedNodes)
	assert.Contains(t, step.Message, "every node (3)")

	joined := pass(step.Next, []string{"a", "b", "c", "d"}, nil)
	assert.Equal(t, v1alpha1.DroppingOldCA, joined.Next.Phase, "a node that joins once the old CA is being dropped is not waited for: its kubelet got a certificate of the new CA")

	issuing := enter(Start(v1alpha1.TrustingNewCA, t0), v1alpha1.IssuingFromNewCA, t0)
	step = Authority(issuing, AuthorityObserved{Rolled: true, Kubelets: &KubeletsObserved{Nodes: []string{"a"}, Renewed: []string{"a"}, Lifetime: year}}, t0.Add(time.Minute))
	require.NotNil(t, step.Next)
	assert.Equal(t, v1alpha1.DroppingOldCA, step.Next.Phase, "a kubelet that renewed while the certificates were issued again is not waited for")
}
