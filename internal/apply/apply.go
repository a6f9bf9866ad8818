package apply

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// HashAnnotation records the digest of what was last applied, so that a
// change of the rendering is seen even where the object still contains every
// desired field (a field that is no longer rendered, say).
const HashAnnotation = "controlplane.cluster.x-k8s.io/applied-hash"

// Change is what Sync had to do to an object.
type Change int

// The changes Sync reports.
const (
	// Unchanged: the object already matched.
	Unchanged Change = iota
	// Created: the object was missing.
	Created
	// Updated: the rendering changed since the object was last applied.
	Updated
	// Restored: the rendering is the one last applied, yet the object
	// differs from it: someone else edited it, and the edit was undone.
	Restored
	// Held: the rendering changed, and the Holder kept the object as it is.
	Held
)

// Holder decides whether a change of the rendering of an object that exists
// waits: current is the object as it is, want what would be applied.
type Holder func(ctx context.Context, current, want *unstructured.Unstructured) (bool, error)

// ConflictError reports an object of the desired name that someone else
// owns; it is never overwritten.
type ConflictError struct{ Kind, Namespace, Name string }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s %s/%s exists and is not owned by this control plane; delete or rename it", e.Kind, e.Namespace, e.Name)
}

// Applier applies desired objects. Reader is normally the manager's cache;
// LiveReader, read only before a create, catches an object the cache does not
// see because it lacks our labels.
type Applier struct {
	Client     client.Client
	Reader     client.Reader
	LiveReader client.Reader
	Owner      string
}

// Apply makes the object in the cluster match desired and reports whether
// it had to write. desired must carry its apiVersion and kind, and either a
// controller owner reference to the object that owns it or contract.ManagedByLabel.
func (a *Applier) Apply(ctx context.Context, desired client.Object) (bool, error) {
	change, err := a.Sync(ctx, desired)
	return change != Unchanged, err
}

// Sync is Apply that also tells what kind of write it made.
func (a *Applier) Sync(ctx context.Context, desired client.Object) (Change, error) {
	return a.SyncHeld(ctx, desired, nil)
}

// SyncHeld is Sync that asks hold, when the rendering of an object that
// exists changed, whether the change waits; hold may be nil.
func (a *Applier) SyncHeld(ctx context.Context, desired client.Object, hold Holder) (Change, error) {
	want, err := Unstructured(desired)
	if err != nil {
		return Unchanged, err
	}
	current, err := a.current(ctx, desired)
	if err != nil {
		return Unchanged, err
	}
	change := Created
	if current != nil {
		if !a.owns(desired, current) {
			return Unchanged, &ConflictError{Kind: want.GetKind(), Namespace: want.GetNamespace(), Name: want.GetName()}
		}
		sameHash := current.GetAnnotations()[HashAnnotation] == want.GetAnnotations()[HashAnnotation]
		switch {
		case sameHash && Contains(current.Object, want.Object):
			return Unchanged, nil
		case sameHash:
			change = Restored
		default:
			change = Updated
		}
		if change == Updated && hold != nil {
			held, err := hold(ctx, current, want)
			if err != nil || held {
				return Held, err
			}
		}
	}
	err = a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(want), client.FieldOwner(a.Owner), client.ForceOwnership)
	if err != nil {
		return Unchanged, fmt.Errorf("apply %s %s: %w", want.GetKind(), want.GetName(), err)
	}
	return change, nil
}

// DryRun is what applying desired would make of the object, as the API
// server answers a dry run: defaulted, with what others own.
func (a *Applier) DryRun(ctx context.Context, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	result := want.DeepCopy()
	err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(result), client.FieldOwner(a.Owner), client.ForceOwnership, client.DryRunAll)
	if err != nil {
		return nil, fmt.Errorf("dry run apply %s %s: %w", want.GetKind(), want.GetName(), err)
	}
	return result, nil
}

// Delete deletes the object of desired's name if it is ours, and reports
// whether it did.
func (a *Applier) Delete(ctx context.Context, desired client.Object) (bool, error) {
	current, err := a.current(ctx, desired)
	if err != nil || current == nil {
		return false, err
	}
	if !a.owns(desired, current) {
		return false, nil // not ours: leave it
	}
	if err := a.Client.Delete(ctx, desired, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("delete %s %s: %w", desired.GetObjectKind().GroupVersionKind().Kind, desired.GetName(), err)
	}
	return true, nil
}

// current is the object as it is now, as unstructured, or nil when missing.
func (a *Applier) current(ctx context.Context, desired client.Object) (*unstructured.Unstructured, error) {
	obj, ok := desired.DeepCopyObject().(client.Object)
	if !ok {
		return nil, fmt.Errorf("%T is not a client.Object", desired)
	}
	key := client.ObjectKeyFromObject(desired)
	err := a.Reader.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = a.LiveReader.Get(ctx, key, obj)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", desired.GetObjectKind().GroupVersionKind().Kind, key, err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: u}, nil
}

// owns tells whether current is ours: it has desired's controller, or, where
// desired has none, our contract.ManagedByLabel.
func (a *Applier) owns(desired client.Object, current *unstructured.Unstructured) bool {
	want := metav1.GetControllerOf(desired)
	if want == nil {
		return desired.GetLabels()[contract.ManagedByLabel] == a.Owner && current.GetLabels()[contract.ManagedByLabel] == a.Owner
	}
	have := metav1.GetControllerOfNoCopy(current)
	return have != nil && want.UID == have.UID
}

// Unstructured converts a rendered object into what is applied: no status,
// no null fields, and the digest of the rest in HashAnnotation.
func Unstructured(obj client.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %T: %w", obj, err)
	}
	delete(m, "status")
	pruneNulls(m)
	u := &unstructured.Unstructured{Object: m}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[HashAnnotation] = contract.Digest(data)
	u.SetAnnotations(annotations)
	return u, nil
}

func pruneNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
			} else {
				pruneNulls(e)
			}
		}
	case []any:
		for _, e := range t {
			pruneNulls(e)
		}
	}
}

// Contains reports whether have holds every field of want with the same
// value. Lists match when want's items match items of have in order; have may
// hold more (defaults and other owners' entries).
func Contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		if len(w) == 0 {
			return true
		}
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !Contains(h[k], v) {
				return false
			}
		}
		return true
	case []any:
		if len(w) == 0 {
			return true
		}
		h, ok := have.([]any)
		if !ok {
			return false
		}
		i := 0
		for _, item := range w {
			for i < len(h) && !Contains(h[i], item) {
				i++
			}
			if i == len(h) {
				return false
			}
			i++
		}
		return true
	default:
		return fmt.Sprint(have) == fmt.Sprint(want)
	}
}

// Prune deletes the objects in list that the owner controls but that are not
// in keep, and reports how many it deleted.
func (a *Applier) Prune(ctx context.Context, list client.ObjectList, owner types.UID, keep map[string]bool, opts ...client.ListOption) (int, error) {
	if err := a.Reader.List(ctx, list, opts...); err != nil {
		return 0, err
	}
	objs, err := metaList(list)
	if err != nil {
		return 0, err
	}
	deleted := 0
	for _, obj := range objs {
		ref := metav1.GetControllerOfNoCopy(obj)
		if ref == nil || ref.UID != owner || keep[obj.GetName()] {
			continue
		}
		if err := a.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return deleted, fmt.Errorf("delete %s: %w", obj.GetName(), err)
		}
		deleted++
	}
	return deleted, nil
}

func metaList(list client.ObjectList) ([]client.Object, error) {
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	objs := make([]client.Object, 0, len(items))
	for _, item := range items {
		obj, ok := item.(client.Object)
		if !ok {
			return nil, fmt.Errorf("%T is not a client.Object", item)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}
