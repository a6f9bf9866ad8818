package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/rotation"
)

// rotationSteps are the steps of the key rotations under way, by the
// component whose pods they change, for the pass's stamp: a rotation is a
// rollout the user asked for, so its renderings are never held back (see
// internal/rollout).
func rotationSteps(in render.Input) map[string]string {
	steps := map[string]string{}
	if r := in.ControlPlane.Status.ServiceAccountKey.Rotation; r != nil {
		step := v1alpha1.RotateServiceAccountKey + "=" + string(r.Phase)
		if components.ServiceAccountKeyReplaced(in) {
			step += "+replaced"
		}
		steps[contract.APIServerComponent] = step
		steps[contract.ControllerManagerComponent] = step
	}
	if r := in.ControlPlane.Status.Encryption.Rotation; r != nil {
		addStep(steps, contract.APIServerComponent, v1alpha1.RotateEncryptionKey+"="+string(r.Phase))
	}
	for _, k := range authorityKinds {
		a := k.of(in)
		r := a.Rotation()
		if r == nil {
			continue
		}
		step := k.key + "=" + string(r.Phase)
		if a.Replaced() {
			step += "+replaced"
		}
		addStep(steps, contract.APIServerComponent, step)
		switch k.key {
		case v1alpha1.RotateEtcdCA:
			addStep(steps, contract.EtcdComponent, step)
		case v1alpha1.RotateClusterCA:
			addStep(steps, contract.ControllerManagerComponent, step)
			addStep(steps, contract.SchedulerComponent, step)
		}
	}
	return steps
}

// addStep adds a rotation's step to those of component.
func addStep(steps map[string]string, component, step string) {
	if other := steps[component]; other != "" {
		step = other + "," + step
	}
	steps[component] = step
}

// takeRotations takes the requests of the rotate annotation: it starts a
// rotation of each key it names that is not being rotated, and removes the
// annotation in a later pass, once the status that records them is stored,
// so that a request is never lost; and never taken twice, since a pass from
// a cached copy that does not show the rotation yet finds it in the stored
// one. Names that are no key are told in a Warning event and dropped with
// the annotation.
func (r *Reconciler) takeRotations(ctx context.Context, s *scope) {
	value, asked := s.hcp.Annotations[v1alpha1.RotateAnnotation]
	if !asked {
		return
	}
	keys, unknown := rotation.Requests(value)
	if len(unknown) > 0 && r.told.tell(s.hcp.UID, v1alpha1.RotateAnnotation, value) {
		r.recorder.Eventf(s.hcp, nil, corev1.EventTypeWarning, v1alpha1.RotationRequestInvalidReason, "Rotate",
			"metadata.annotations[%s]: %q cannot be rotated; it must be %s", v1alpha1.RotateAnnotation, strings.Join(unknown, ","), rotation.Allowed)
	}
	var fresh []string
	for _, key := range keys {
		if rotating(s.hcp, key) == nil {
			fresh = append(fresh, key)
		}
	}
	if len(fresh) == 0 {
		// Every key it names is being rotated: the request was taken.
		delete(s.hcp.Annotations, v1alpha1.RotateAnnotation)
		r.told.forget(s.hcp.UID, v1alpha1.RotateAnnotation)
		return
	}
	stored := &v1alpha1.HostedControlPlane{}
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(s.hcp), stored); err != nil {
		s.wakeWithin(time.Second)
		return
	}
	for _, key := range fresh {
		if rotating(stored, key) != nil {
			s.wakeWithin(time.Second) // taken by a pass this one's copy does not show
			continue
		}
		switch key {
		case v1alpha1.RotateServiceAccountKey:
			r.startServiceAccountKeyRotation(ctx, s)
		case v1alpha1.RotateEncryptionKey:
			r.startEncryptionKeyRotation(ctx, s)
		default:
			if k, ok := authorityKindOf(key); ok {
				r.startAuthorityRotation(ctx, s, k)
			}
		}
	}
}

// rotating is the rotation of key under way in hcp's status; nil when none is.
func rotating(hcp *v1alpha1.HostedControlPlane, key string) *v1alpha1.KeyRotation {
	switch key {
	case v1alpha1.RotateServiceAccountKey:
		return hcp.Status.ServiceAccountKey.Rotation
	case v1alpha1.RotateEncryptionKey:
		return hcp.Status.Encryption.Rotation
	}
	if k, ok := authorityKindOf(key); ok {
		return k.status(hcp).Rotation
	}
	return nil
}

// wakeWithin asks the pass to come back within d at the latest.
func (s *scope) wakeWithin(d time.Duration) {
	if s.soon == 0 || d < s.soon {
		s.soon = d
	}
}

// startServiceAccountKeyRotation starts a rotation of the service account
// key, once what the last one left behind is gone: a new key is issued
// into a Secret that does not exist, never taken from one that held the
// key in use.
func (r *Reconciler) startServiceAccountKeyRotation(ctx context.Context, s *scope) {
	gone, err := r.removeNextServiceAccountKey(ctx, s, true)
	if err != nil || !gone {
		s.wakeWithin(time.Second)
		return
	}
	s.hcp.Status.ServiceAccountKey.Rotation = rotation.Start(v1alpha1.TrustingNewKey, time.Now())
	s.wakeWithin(time.Second)
	r.recorder.Eventf(s.hcp, nil, corev1.EventTypeNormal, string(v1alpha1.TrustingNewKey), "RotateServiceAccountKey",
		"rotating the service account key: a new key is issued into Secret %s, and the API servers roll to trust it as well as the old one",
		s.in.SANextSecret())
}

// rotateServiceAccountKey keeps ServiceAccountKeyReady and moves a
// rotation of the service account key on, after the management phases of
// the pass: a phase ends once every pod runs what it renders (see
// internal/rotation).
func (r *Reconciler) rotateServiceAccountKey(ctx context.Context, s *scope) {
	current := s.hcp.Status.ServiceAccountKey.Rotation
	r.takeDropOldKey(s, current)
	if current == nil {
		r.record(s.hcp, v1alpha1.ServiceAccountKeyReadyCondition, readiness.Ready(serviceAccountKeyReady(s)))
		if _, err := r.removeNextServiceAccountKey(ctx, s, false); err != nil {
			r.recorder.Eventf(s.hcp, nil, corev1.EventTypeWarning, v1alpha1.ApplyFailedReason, "RotateServiceAccountKey",
				"the new key of the last rotation is not removed from Secret %s yet: %v", s.in.SANextSecret(), err)
		}
		return
	}
	rolled, err := r.serviceAccountKeysRolled(ctx, s)
	if err != nil {
		r.record(s.hcp, v1alpha1.ServiceAccountKeyReadyCondition, readiness.Problem(string(current.Phase), "%v; retrying", err))
		return
	}
	step := rotation.ServiceAccountKey(current, rotation.ServiceAccountObserved{
		Rolled: rolled, Replaced: components.ServiceAccountKeyReplaced(s.in), MaxTokenLifetime: components.MaxTokenLifetime(s.in),
		DropOldKey: s.hcp.Annotations[v1alpha1.DropOldServiceAccountKeyAnnotation] == "true",
	}, time.Now())
	if step.Replace {
		if err := r.replaceServiceAccountKey(ctx, s); err != nil {
			r.record(s.hcp, v1alpha1.ServiceAccountKeyReadyCondition, readiness.Problem(string(v1alpha1.DroppingOldKey), "%v; retrying", err))
			return
		}
	}
	if step.Wake > 0 {
		s.wakeWithin(step.Wake)
	}
	s.hcp.Status.ServiceAccountKey.Rotation = step.Next
	if step.Next == nil {
		s.hcp.Status.ServiceAccountKey.RotatedAt = ptrTime(time.Now())
		r.record(s.hcp, v1alpha1.ServiceAccountKeyReadyCondition, readiness.Ready(serviceAccountKeyReady(s)))
		r.recorder.Eventf(s.hcp, nil, corev1.EventTypeNormal, v1alpha1.ReadyReason, "RotateServiceAccountKey",
			"the service account key was rotated: tokens signed by the old key are refused, the key in Secret %s alone signs and verifies", s.in.SASecret())
		return
	}
	if step.Next.Phase != current.Phase {
		s.wakeWithin(time.Second) // the next pass renders the new phase
		r.recorder.Eventf(s.hcp, nil, corev1.EventTypeNormal, string(step.Next.Phase), "RotateServiceAccountKey", "%s", step.Message)
	}
	r.record(s.hcp, v1alpha1.ServiceAccountKeyReadyCondition, readiness.Waiting(string(step.Next.Phase),
		"rotation asked for at %s, in this phase since %s: %s", stamp(step.Next.StartedAt), stamp(step.Next.Since), step.Message))
}

// takeDropOldKey removes the annotation that asks to drop the old service
// account key without waiting for its tokens, once the stored rotation
// (current) dropped it, so that a request is never lost; and at once, told
// in a Warning event, when no rotation of the key is under way or asked
// for in the same update.
func (r *Reconciler) takeDropOldKey(s *scope, current *v1alpha1.KeyRotation) {
	if _, asked := s.hcp.Annotations[v1alpha1.DropOldServiceAccountKeyAnnotation]; !asked {
		return
	}
	switch {
	case current != nil && current.Phase == v1alpha1.DroppingOldKey:
	case current == nil && !rotationAsked(s.hcp, v1alpha1.RotateServiceAccountKey):
		r.recorder.Eventf(s.hcp, nil, corev1.EventTypeWarning, v1alpha1.RotationRequestInvalidReason, "RotateServiceAccountKey",
			"metadata.annotations[%s]: no rotation of the service account key is under way; ask for one with %s=%s",
			v1alpha1.DropOldServiceAccountKeyAnnotation, v1alpha1.RotateAnnotation, v1alpha1.RotateServiceAccountKey)
	default:
		return
	}
	delete(s.hcp.Annotations, v1alpha1.DropOldServiceAccountKeyAnnotation)
}

// rotationAsked tells whether the rotate annotation names key.
func rotationAsked(hcp *v1alpha1.HostedControlPlane, key string) bool {
	keys, _ := rotation.Requests(hcp.Annotations[v1alpha1.RotateAnnotation])
	return slices.Contains(keys, key)
}

func stamp(t metav1.Time) string { return t.UTC().Format(time.RFC3339) }

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

// serviceAccountKeyReady is what ServiceAccountKeyReady says outside a
// rotation.
func serviceAccountKeyReady(s *scope) string {
	msg := fmt.Sprintf("the API servers and the controller manager sign service account tokens with the key in Secret %s, and the API servers trust it alone", s.in.SASecret())
	if at := s.hcp.Status.ServiceAccountKey.RotatedAt; at != nil {
		msg += "; last rotated at " + stamp(*at)
	}
	return msg
}

// serviceAccountKeysRolled tells whether every API server and controller
// manager pod, terminating ones included, runs with the service account
// keys this pass renders, and both have rolled out in this pass.
func (r *Reconciler) serviceAccountKeysRolled(ctx context.Context, s *scope) (bool, error) {
	if !s.done[v1alpha1.APIServerReadyCondition] || !s.done[v1alpha1.ControllersReadyCondition] || s.facts.apiServerPods == nil {
		return false, nil
	}
	apiServer, controllerManager := components.ServiceAccountFlags(s.in)
	kcm := &corev1.PodList{}
	if err := r.client.List(ctx, kcm, client.InNamespace(s.in.Namespace()), client.MatchingLabels(s.in.Selector(contract.ControllerManagerComponent))); err != nil {
		return false, fmt.Errorf("list the controller manager's pods: %w", err)
	}
	return podsRun(s.facts.apiServerPods.Items, "kube-apiserver", apiServer) &&
		podsRun(kcm.Items, contract.ControllerManagerComponent, controllerManager), nil
}

// podsRun tells whether every pod's container takes exactly the service
// account key flags want. There is at least one pod.
func podsRun(pods []corev1.Pod, container string, want []string) bool {
	if len(pods) == 0 {
		return false
	}
	for i := range pods {
		var have []string
		for _, c := range pods[i].Spec.Containers {
			if c.Name == container {
				have = slices.DeleteFunc(slices.Clone(c.Args), func(arg string) bool { return !components.ServiceAccountKeyFlag(arg) })
			}
		}
		if !slices.Equal(have, want) {
			return false
		}
	}
	return true
}

// replaceServiceAccountKey writes the new key into <cluster>-sa, where the
// old one was. cert-manager keeps a key it finds there (rotationPolicy
// Never) and issues the Secret's certificate for it; until the next pass
// observes the new key there, the pods keep trusting both.
func (r *Reconciler) replaceServiceAccountKey(ctx context.Context, s *scope) error {
	next := &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: s.in.Namespace(), Name: s.in.SANextSecret()}, next); err != nil {
		return fmt.Errorf("read the new service account key in Secret %s: %w", s.in.SANextSecret(), err)
	}
	key := next.Data[corev1.TLSPrivateKeyKey]
	if len(key) == 0 {
		return fmt.Errorf("the Secret %s holds no %s", next.Name, corev1.TLSPrivateKeyKey)
	}
	current := &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: s.in.Namespace(), Name: s.in.SASecret()}, current); err != nil {
		return fmt.Errorf("read Secret %s: %w", s.in.SASecret(), err)
	}
	if string(current.Data[corev1.TLSPrivateKeyKey]) == string(key) {
		return nil // written in a pass the cache did not show yet
	}
	patch := client.MergeFromWithOptions(current.DeepCopy(), client.MergeFromWithOptimisticLock{})
	current.Data[corev1.TLSPrivateKeyKey] = key
	if err := r.client.Patch(ctx, current, patch); err != nil {
		return fmt.Errorf("write the new service account key into Secret %s: %w", current.Name, err)
	}
	r.recorder.Eventf(s.hcp, current, corev1.EventTypeNormal, string(v1alpha1.DroppingOldKey), "RotateServiceAccountKey",
		"wrote the new service account key into Secret %s, in place of the old one; the API servers roll to trust it alone", current.Name)
	return nil
}

// removeNextServiceAccountKey removes the Certificate and the Secret of the
// new key of a rotation that ended (its key is in <cluster>-sa now), the
// Certificate first or cert-manager would issue it again. It tells whether
// both are gone. Outside a rotation the cache is asked alone, so an idle
// control plane costs no request; before one starts, the API server too.
func (r *Reconciler) removeNextServiceAccountKey(ctx context.Context, s *scope, live bool) (bool, error) {
	key := client.ObjectKey{Namespace: s.in.Namespace(), Name: s.in.SANextSecret()}
	return r.removeNamed(ctx, key, live, &cmv1.Certificate{}, &corev1.Secret{})
}

// removeNamed deletes the objects of key's name, in the order given (a
// Certificate before its Secret, or cert-manager issues it again), and
// tells whether all were gone already. The cache is asked first; when live,
// an object it does not hold is asked of the API server too.
func (r *Reconciler) removeNamed(ctx context.Context, key client.ObjectKey, live bool, objs ...client.Object) (bool, error) {
	gone := true
	for _, obj := range objs {
		err := r.client.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) && live {
			err = r.apiReader.Get(ctx, key, obj)
		}
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", key.Name, err)
		}
		gone = false
		if err := r.client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("delete %T %s: %w", obj, key.Name, err)
		}
	}
	return gone, nil
}
