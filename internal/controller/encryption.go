package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/encryption"
)

// rewriteInterval is how soon the next page of Secrets is rewritten.
const rewriteInterval = time.Second

// observeEncryption finds the Secret with the control plane's encryption
// keys, creating it the first time, and reads which keys it holds. The API
// servers mount it; its digest rolls them when the keys change. A Secret
// that holds nothing they can encrypt with holds their phase, so that none
// rolls onto it.
func (r *Reconciler) observeEncryption(ctx context.Context, s *scope, in render.Input, o *render.Observed) {
	secret, err := r.encryptionSecret(ctx, s.hcp, in)
	if err != nil {
		s.held[v1alpha1.APIServerReadyCondition] = failure(err)
		return
	}
	keys, err := encryption.Read(secret.Data[contract.EncryptionConfigKey])
	if err != nil {
		s.held[v1alpha1.APIServerReadyCondition] = readiness.Problem(v1alpha1.EncryptionConfigInvalidReason,
			"Secret %s, key %s: %v; the API servers keep the keys they started with, and none rolls until it is fixed",
			secret.Name, contract.EncryptionConfigKey, err)
		return
	}
	// The Secret may be new in this pass, before the cache has it.
	if o.SecretDigests == nil {
		o.SecretDigests = map[string]string{}
	}
	o.SecretDigests[secret.Name] = contract.DataDigest(secret.Data)
	s.keys = &keys
	s.encryptionSecret = secret
}

// encryptionSecret is the Secret with the control plane's encryption keys.
// The key is generated once, by a create that fails if the Secret exists,
// and the Secret's data is written again only by a rotation the user asks
// for, which keeps the old key until every Secret was rewritten with the
// new one (encryptionrotation.go): a key generated anew would leave every
// Secret stored with the old one unreadable. One that exists
// without our labels (kept by a user, or copied for a restore) or kept when
// a control plane of the same name was deleted is adopted.
func (r *Reconciler) encryptionSecret(ctx context.Context, hcp *v1alpha1.HostedControlPlane, in render.Input) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: in.Namespace(), Name: contract.EncryptionSecretName(in.ClusterName())}
	secret := &corev1.Secret{}
	err := r.client.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		// The label-scoped cache does not have it: it may be unlabelled, or
		// too new for the cache.
		err = r.apiReader.Get(ctx, key, secret)
	}
	if err == nil {
		return secret, r.adoptEncryptionSecret(ctx, hcp, in, secret)
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read Secret %s: %w", key.Name, err)
	}
	data, err := encryption.NewRandomConfig(time.Now())
	if err != nil {
		return nil, err
	}
	secret = &corev1.Secret{
		// No owner: the Secret may have to outlive the control plane (see
		// reconcileDelete).
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: in.Labels("")},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{contract.EncryptionConfigKey: data},
	}
	if err := r.client.Create(ctx, secret); err != nil {
		return nil, fmt.Errorf("create Secret %s: %w", key.Name, err)
	}
	r.recorder.Eventf(hcp, secret, corev1.EventTypeNormal, v1alpha1.ReadyReason, "GenerateEncryptionKey",
		"generated a %s key for the workload cluster's Secrets in Secret %s; keep it as long as any etcd snapshot of this cluster", encryption.Provider, key.Name)
	return secret, nil
}

// adoptEncryptionSecret gives an encryption Secret the control plane did not
// create our labels, so that it is watched and digested, and takes the mark
// of a Secret kept after a deletion off. Only its metadata is written.
func (r *Reconciler) adoptEncryptionSecret(ctx context.Context, hcp *v1alpha1.HostedControlPlane, in render.Input, secret *corev1.Secret) error {
	_, kept := secret.Annotations[v1alpha1.EncryptionKeyKeptAnnotation]
	labelled := true
	for k, v := range in.Labels("") {
		labelled = labelled && secret.Labels[k] == v
	}
	if labelled && !kept {
		return nil
	}
	patch := client.MergeFrom(secret.DeepCopy())
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	for k, v := range in.Labels("") {
		secret.Labels[k] = v
	}
	delete(secret.Annotations, v1alpha1.EncryptionKeyKeptAnnotation)
	if err := r.client.Patch(ctx, secret, patch); err != nil {
		return fmt.Errorf("adopt Secret %s: %w", secret.Name, err)
	}
	r.recorder.Eventf(hcp, secret, corev1.EventTypeNormal, v1alpha1.ReadyReason, "AdoptEncryptionKey",
		"adopted the keys in Secret %s: the API servers encrypt and decrypt the workload cluster's Secrets with them", secret.Name)
	return nil
}

// snapshotsMayExist tells whether a store may hold etcd snapshots that only
// the control plane's encryption keys decrypt: it backs up, stored a
// snapshot, or was restored from one (whose cluster shares its keys).
func snapshotsMayExist(hcp *v1alpha1.HostedControlPlane) bool {
	return hcp.Spec.Etcd.Backup != nil || hcp.Spec.Etcd.Restore != nil || hcp.Status.Etcd.LastBackupKey != ""
}

// keepEncryptionSecret marks the encryption Secret of a control plane being
// deleted as kept, and says so once.
func (r *Reconciler) keepEncryptionSecret(ctx context.Context, hcp *v1alpha1.HostedControlPlane, secret *corev1.Secret) error {
	if _, kept := secret.Annotations[v1alpha1.EncryptionKeyKeptAnnotation]; kept {
		return nil
	}
	patch := client.MergeFrom(secret.DeepCopy())
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[v1alpha1.EncryptionKeyKeptAnnotation] = hcp.Name
	if err := r.client.Patch(ctx, secret, patch); err != nil {
		return fmt.Errorf("keep Secret %s: %w", secret.Name, err)
	}
	r.recorder.Eventf(hcp, secret, corev1.EventTypeNormal, v1alpha1.DeletingReason, "KeepEncryptionKey",
		"kept Secret %s: the etcd snapshots of this cluster hold its Secrets encrypted with these keys, and a restore needs them; delete it with the snapshots", secret.Name)
	return nil
}

// rewrites are the rewrites of Secrets under way, by control plane: where
// the next page starts and what the pages before counted. Kept in memory: a
// controller that restarts starts a rewrite over, which costs reads only
// for the Secrets already rewritten.
type rewrites struct{ m sync.Map }

// rewrite is one rewrite under way.
type rewrite struct {
	// key and after are what status.encryption records once it is done.
	key, after string
	encryption.Progress
}

func (w *rewrites) load(uid types.UID, key, after string) rewrite {
	if v, ok := w.m.Load(uid); ok && v.(rewrite).key == key && v.(rewrite).after == after {
		return v.(rewrite)
	}
	return rewrite{key: key, after: after}
}

func (w *rewrites) store(uid types.UID, rw rewrite) { w.m.Store(uid, rw) }

func (w *rewrites) forget(uid types.UID) { w.m.Delete(uid) }

// restoredAfter is the restore in place the workload cluster's data last
// came from; empty when none did.
func restoredAfter(hcp *v1alpha1.HostedControlPlane) string {
	if from := hcp.Status.Etcd.RestoredFrom; from != nil {
		return from.ID
	}
	return ""
}

// rewriteSecrets keeps EncryptionReady: once every API server runs with the
// keys (APIServerReady is done in this pass), it updates the workload
// cluster's Secrets unchanged, a page per pass through live (uncached: the
// ClusterCache caches none of them), so that those stored before the key
// that writes took over are written again with it. It says whether another
// page is due.
func (r *Reconciler) rewriteSecrets(ctx context.Context, s *scope, live client.Client) (bool, error) {
	keys := s.keys
	if keys == nil {
		return false, nil // observation held APIServerReady, which says why
	}
	st, after := s.hcp.Status.Encryption, restoredAfter(s.hcp)
	what := keys.Provider + " key " + keys.Write
	// A rotation under way says what it does, but while pages are
	// rewritten.
	settled := func(out readiness.Outcome) readiness.Outcome {
		if s.encryptionRotation != nil {
			return *s.encryptionRotation
		}
		return out
	}
	if st.RewrittenWith == keys.Write && st.RewrittenAfter == after {
		r.rewrites.forget(s.hcp.UID)
		r.record(s.hcp, v1alpha1.EncryptionReadyCondition, settled(readiness.Ready(
			"the API servers encrypt Secrets with "+what+", and every Secret stored before was rewritten with it")))
		return false, nil
	}
	if !s.apiServersRolled {
		r.record(s.hcp, v1alpha1.EncryptionReadyCondition, settled(readiness.Waiting(v1alpha1.WaitingReason,
			"waiting for every API server pod to run with %s (APIServerReady) before the Secrets stored before it are rewritten", what)))
		return false, nil
	}
	rw := r.rewrites.load(s.hcp.UID, keys.Write, after)
	p, err := encryption.Rewrite(ctx, live, rw.Progress)
	if err != nil {
		out := readiness.Problem(v1alpha1.RewritingSecretsReason, "rewriting the Secrets with %s: %v; retrying", what, err)
		if strings.Contains(err.Error(), "unable to transform key") {
			// What the API server says when no key of its configuration
			// decrypts a stored value.
			out.Message = fmt.Sprintf("the API servers cannot decrypt Secrets stored with a key that Secret %s does not hold "+
				"(restored from a snapshot of a cluster whose key was not kept? create the Secret with that cluster's keys): %v",
				contract.EncryptionSecretName(s.cluster.Name), err)
		}
		r.record(s.hcp, v1alpha1.EncryptionReadyCondition, out)
		return false, fmt.Errorf("%s: %s", v1alpha1.EncryptionReadyCondition, out.Message)
	}
	rw.Progress = p
	if !p.Done {
		r.rewrites.store(s.hcp.UID, rw)
		r.record(s.hcp, v1alpha1.EncryptionReadyCondition, readiness.Waiting(v1alpha1.RewritingSecretsReason,
			"rewriting the Secrets stored before %s took over: %d checked so far, %d of them written again", what, p.Checked, p.Rewritten))
		return true, nil
	}
	r.rewrites.forget(s.hcp.UID)
	s.rewritten = &rw
	r.record(s.hcp, v1alpha1.EncryptionReadyCondition, settled(readiness.Ready(
		"the API servers encrypt Secrets with "+what+", and every Secret stored before was rewritten with it")))
	r.recorder.Eventf(s.hcp, nil, corev1.EventTypeNormal, v1alpha1.ReadyReason, "RewriteSecrets",
		"every Secret of the workload cluster is stored with %s: %d checked, %d of them written again", what, p.Checked, p.Rewritten)
	return false, nil
}
