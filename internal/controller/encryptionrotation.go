package controller

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/encryption"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/rotation"
)

// A rotation of the encryption key is recorded on the Secret that holds the
// keys (v1alpha1.EncryptionRotationAnnotation), and each phase's keys are
// written with it in one update: what the API servers read and the phase
// never disagree, whatever pass fails. status.encryption.rotation shows it.

// encryptionRotationOf is the rotation the encryption Secret records; nil
// when none is under way.
func encryptionRotationOf(secret *corev1.Secret) (*v1alpha1.KeyRotation, error) {
	value, ok := secret.Annotations[v1alpha1.EncryptionRotationAnnotation]
	if !ok {
		return nil, nil
	}
	r := &v1alpha1.KeyRotation{}
	if err := json.Unmarshal([]byte(value), r); err != nil || r.Key == "" {
		return nil, fmt.Errorf("the annotation %s of Secret %s is not a rotation the controller wrote; remove it to end the rotation with the keys as they are",
			v1alpha1.EncryptionRotationAnnotation, secret.Name)
	}
	return r, nil
}

// startEncryptionKeyRotation generates a new key and writes it into the
// encryption Secret, to decrypt with; the old key still encrypts.
func (r *Reconciler) startEncryptionKeyRotation(ctx context.Context, s *scope) {
	secret := s.encryptionSecret
	if secret == nil || s.keys == nil {
		return // EncryptionReady or APIServerReady says why; the annotation waits
	}
	if _, under := secret.Annotations[v1alpha1.EncryptionRotationAnnotation]; under {
		return // recorded in a pass this one's copy of the status does not show
	}
	data, name, err := encryption.AddKey(secret.Data[contract.EncryptionConfigKey], rand.Reader, time.Now())
	if err != nil {
		r.recorder.Eventf(s.hcp, nil, corev1.EventTypeWarning, v1alpha1.EncryptionConfigInvalidReason, "RotateEncryptionKey",
			"the encryption key is not rotated: Secret %s, key %s: %v", secret.Name, contract.EncryptionConfigKey, err)
		return
	}
	rot := rotation.Start(v1alpha1.DecryptingWithNewKey, time.Now())
	rot.Key = name
	if err := r.writeEncryptionKeys(ctx, s, data, nil, rot); err != nil {
		s.wakeWithin(time.Second)
		return
	}
	s.hcp.Status.Encryption.Rotation = rot
	s.wakeWithin(time.Second)
	r.recorder.Eventf(s.hcp, nil, corev1.EventTypeNormal, string(rot.Phase), "RotateEncryptionKey",
		"rotating the encryption key: a new %s key %s is written into Secret %s, and the API servers roll to decrypt with it as well",
		encryption.Provider, name, secret.Name)
}

// rotateEncryptionKey moves a rotation of the encryption key on, after the
// management phases of the pass: a phase ends once every API server pod
// runs the configuration it wrote, and the old key is dropped only once
// every Secret was written again with the new one (rewriteSecrets). What
// it says is EncryptionReady's while no rewrite is due.
func (r *Reconciler) rotateEncryptionKey(ctx context.Context, s *scope) {
	if s.encryptionSecret == nil {
		return
	}
	current, err := encryptionRotationOf(s.encryptionSecret)
	if err != nil {
		out := readiness.Problem(v1alpha1.EncryptionConfigInvalidReason, "%v", err)
		s.encryptionRotation = &out
		return
	}
	s.hcp.Status.Encryption.Rotation = current
	if current == nil {
		return
	}
	step := rotation.EncryptionKey(current, rotation.EncryptionObserved{
		Rolled:    s.apiServersRolled,
		Rewritten: s.hcp.Status.Encryption.RewrittenWith == current.Key,
	}, time.Now())
	if step.Next == nil || step.Next.Phase != current.Phase {
		if err := r.writeEncryptionPhase(ctx, s, step.Next); err != nil {
			out := readiness.Problem(string(current.Phase), "%v; retrying", err)
			s.encryptionRotation = &out
			return
		}
		s.wakeWithin(time.Second)
	}
	s.hcp.Status.Encryption.Rotation = step.Next
	if step.Next == nil {
		s.hcp.Status.Encryption.RotatedAt = ptrTime(time.Now())
		r.recorder.Eventf(s.hcp, nil, corev1.EventTypeNormal, v1alpha1.ReadyReason, "RotateEncryptionKey",
			"the encryption key was rotated: every Secret is stored with %s key %s, and the old key left the API servers' configuration (Secret %s keeps it under before-%s.yaml for snapshots taken before)",
			encryption.Provider, current.Key, s.encryptionSecret.Name, current.Key)
		return
	}
	if step.Next.Phase != current.Phase {
		r.recorder.Eventf(s.hcp, nil, corev1.EventTypeNormal, string(step.Next.Phase), "RotateEncryptionKey", "%s", step.Message)
	}
	out := readiness.Waiting(string(step.Next.Phase), "rotating to %s key %s, asked for at %s, in this phase since %s: %s",
		encryption.Provider, step.Next.Key, stamp(step.Next.StartedAt), stamp(step.Next.Since), step.Message)
	s.encryptionRotation = &out
}

// writeEncryptionPhase writes the keys of the phase next enters (nil: the
// rotation ended), from those of the phase before.
func (r *Reconciler) writeEncryptionPhase(ctx context.Context, s *scope, next *v1alpha1.KeyRotation) error {
	data := s.encryptionSecret.Data[contract.EncryptionConfigKey]
	if next == nil {
		return r.writeEncryptionKeys(ctx, s, data, nil, nil)
	}
	var extra map[string][]byte
	var err error
	switch next.Phase {
	case v1alpha1.EncryptingWithNewKey:
		data, err = encryption.Promote(data, next.Key)
	default: // DroppingOldKey
		// The keys before are kept beside, for the snapshots taken with them.
		extra = map[string][]byte{"before-" + next.Key + ".yaml": data}
		data, err = encryption.Drop(data, next.Key)
	}
	if err != nil {
		return fmt.Errorf("the keys in Secret %s, key %s: %w", s.encryptionSecret.Name, contract.EncryptionConfigKey, err)
	}
	return r.writeEncryptionKeys(ctx, s, data, extra, next)
}

// writeEncryptionKeys writes the keys data and the rotation rot (none when
// nil) into the encryption Secret, in one update of the version observed:
// one written meanwhile is read again by the next pass. Its error names the
// Secret and the API server's reason, never what it holds.
func (r *Reconciler) writeEncryptionKeys(ctx context.Context, s *scope, data []byte, extra map[string][]byte, rot *v1alpha1.KeyRotation) error {
	secret := s.encryptionSecret.DeepCopy()
	secret.Data[contract.EncryptionConfigKey] = data
	for k, v := range extra {
		secret.Data[k] = v
	}
	if rot == nil {
		delete(secret.Annotations, v1alpha1.EncryptionRotationAnnotation)
	} else {
		value, err := json.Marshal(rot)
		if err != nil {
			return err
		}
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		secret.Annotations[v1alpha1.EncryptionRotationAnnotation] = string(value)
	}
	if err := r.client.Update(ctx, secret); err != nil {
		return fmt.Errorf("write the keys into Secret %s: %s", secret.Name, apierrors.ReasonForError(err))
	}
	s.encryptionSecret = secret
	return nil
}

// apiServersRolled tells whether the API servers rolled out in this pass
// and every API server pod, terminating ones included, runs the pod
// template it rendered: with the keys observed in it, so that no pod still
// writes with a key the controller is about to stop counting on.
func (r *Reconciler) apiServersRolled(s *scope) bool {
	if !s.done[v1alpha1.APIServerReadyCondition] || s.facts == nil || s.facts.apiServerPods == nil || len(s.facts.apiServerPods.Items) == 0 {
		return false
	}
	objs, err := components.APIServer{}.Render(s.in)
	if err != nil {
		return false
	}
	var want string
	for _, obj := range objs {
		if d, ok := obj.(*appsv1.Deployment); ok {
			want = d.Spec.Template.Annotations[render.SecretsHashAnnotation]
		}
	}
	for _, p := range s.facts.apiServerPods.Items {
		if p.Annotations[render.SecretsHashAnnotation] != want {
			return false
		}
	}
	return want != ""
}
