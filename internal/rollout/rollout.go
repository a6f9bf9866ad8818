package rollout

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// The annotations of a Stamp, on the workload (not its pod template, so that
// writing them restarts nothing), and the one on the pod template.
const (
	RenderedByAnnotation     = "controlplane.cluster.x-k8s.io/rendered-by"
	SpecGenerationAnnotation = "controlplane.cluster.x-k8s.io/spec-generation"
	SpecHashAnnotation       = "controlplane.cluster.x-k8s.io/spec-hash"
	LevelAnnotation          = "controlplane.cluster.x-k8s.io/rendering-level"
	// RestartedAtAnnotation on a pod template is spec.rollout.after, once
	// reached.
	RestartedAtAnnotation = "controlplane.cluster.x-k8s.io/restarted-at"
	// RotationAnnotation on a workload whose pods use a key being rotated
	// names the step of the rotation it is rendered for (internal/rotation).
	RotationAnnotation = "controlplane.cluster.x-k8s.io/rotation"
)

// maxChanges bounds the fields a pending rollout lists.
const maxChanges = 20

// Stamp is what a pass writes on every workload it renders.
type Stamp struct {
	RenderedBy  string
	Generation  int64
	SpecHash    string
	Level       int
	RestartedAt string
	// Rotation is the step of the key rotations under way, by the component
	// (its ComponentLabel) whose pods they change; none outside a rotation.
	Rotation map[string]string
}

// NewStamp is the stamp of a pass over cp at now by a controller of
// settings. It also returns when spec.rollout.after, not reached yet, is
// (zero otherwise), for the pass to come back then.
func NewStamp(cp *v1alpha1.HostedControlPlane, settings render.Settings, now time.Time) (Stamp, time.Time, error) {
	st := Stamp{Generation: cp.Generation, Level: contract.RenderingLevel}
	var err error
	if st.RenderedBy, err = Identity(settings); err != nil {
		return Stamp{}, time.Time{}, err
	}
	spec := cp.Spec.DeepCopy()
	spec.Rollout = v1alpha1.Rollout{}
	data, err := json.Marshal(spec)
	if err != nil {
		return Stamp{}, time.Time{}, fmt.Errorf("digest the spec: %w", err)
	}
	st.SpecHash = contract.Digest(data)
	var later time.Time
	st.RestartedAt, later = restartedAt(cp, now)
	return st, later, nil
}

// restartedAt is spec.rollout.after once reached at now (empty before), and
// when it will be while it is not (zero otherwise).
func restartedAt(cp *v1alpha1.HostedControlPlane, now time.Time) (string, time.Time) {
	after := cp.Spec.Rollout.After
	switch {
	case after.IsZero():
		return "", time.Time{}
	case after.After(now):
		return "", after.Time
	}
	return after.UTC().Format(time.RFC3339), time.Time{}
}

// Restamp writes on want, rendered for cp and not yet stamped, what a pass
// at now would write on it that restarts no pod beyond what cp asks: the
// stamp's annotations as live carries them (who rendered it and from which
// spec is no change of its pods) and RestartedAt as spec.rollout.after asks.
// A component that compares its rendering with the workload that runs (to
// tell a rollout, see etcd's Preflight) compares want so restamped, and sees
// the changes of the pods only.
func Restamp(live metav1.Object, want client.Object, cp *v1alpha1.HostedControlPlane, now time.Time) {
	annotations := maps.Clone(want.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	for _, key := range []string{RenderedByAnnotation, SpecGenerationAnnotation, SpecHashAnnotation, LevelAnnotation} {
		if v, ok := live.GetAnnotations()[key]; ok {
			annotations[key] = v
		} else {
			delete(annotations, key)
		}
	}
	want.SetAnnotations(annotations)
	if template := podTemplate(want); template != nil {
		if at, _ := restartedAt(cp, now); at != "" {
			metav1.SetMetaDataAnnotation(&template.ObjectMeta, RestartedAtAnnotation, at)
		}
	}
}

// Identity names the renderer: this release, and the digest of the
// settings that shape what it renders.
func Identity(settings render.Settings) (string, error) {
	data, err := json.Marshal(settings)
	if err != nil {
		return "", fmt.Errorf("digest the settings: %w", err)
	}
	return contract.Release + "+" + contract.Digest(data), nil
}

// Workload tells whether obj, as applied, runs pods from a template.
func Workload(obj *unstructured.Unstructured) bool {
	switch obj.GroupVersionKind().Kind {
	case "Deployment", "StatefulSet", "DaemonSet":
		return obj.GroupVersionKind().Group == "apps"
	}
	return false
}

// Apply writes the stamp on obj when it is a rendered workload: its
// annotations, and RestartedAt on its pod template.
func (st Stamp) Apply(obj client.Object) {
	template := podTemplate(obj)
	if template == nil {
		return
	}
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[RenderedByAnnotation] = st.RenderedBy
	annotations[SpecGenerationAnnotation] = strconv.FormatInt(st.Generation, 10)
	annotations[SpecHashAnnotation] = st.SpecHash
	annotations[LevelAnnotation] = strconv.Itoa(st.Level)
	if step := st.Rotation[obj.GetLabels()[contract.ComponentLabel]]; step != "" {
		annotations[RotationAnnotation] = step
	}
	obj.SetAnnotations(annotations)
	if st.RestartedAt != "" {
		metav1.SetMetaDataAnnotation(&template.ObjectMeta, RestartedAtAnnotation, st.RestartedAt)
	}
}

// podTemplate is the pod template of a workload; nil for any other object.
func podTemplate(obj client.Object) *corev1.PodTemplateSpec {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template
	case *appsv1.StatefulSet:
		return &o.Spec.Template
	case *appsv1.DaemonSet:
		return &o.Spec.Template
	}
	return nil
}

// Started tells whether the change from current to want is the user's or an
// observation's: the same renderer rendered current, the spec changed
// since, a key rotation the user asked for moved to another step, or
// spec.rollout.after was reached since current's pods started (also when
// this is the first pass of a new release over it: the request may come
// before that pass).
func Started(current, want *unstructured.Unstructured) bool {
	have, next := current.GetAnnotations(), want.GetAnnotations()
	if have[RenderedByAnnotation] == next[RenderedByAnnotation] || have[RotationAnnotation] != next[RotationAnnotation] {
		return true
	}
	if at := templateAnnotation(want, RestartedAtAnnotation); at != "" && at != templateAnnotation(current, RestartedAtAnnotation) {
		return true
	}
	gen, hash := have[SpecGenerationAnnotation], have[SpecHashAnnotation]
	return gen != "" && hash != "" && gen != next[SpecGenerationAnnotation] && hash != next[SpecHashAnnotation]
}

// templateAnnotation is the annotation key of obj's pod template.
func templateAnnotation(obj *unstructured.Unstructured, key string) string {
	v, _, _ := unstructured.NestedString(obj.Object, "spec", "template", "metadata", "annotations", key)
	return v
}

// MustRoll tells whether want is of a rendering level current is below.
func MustRoll(current, want *unstructured.Unstructured) bool {
	return level(current) < level(want)
}

// level is the rendering level of obj; one rendered before levels were
// recorded is of level 0.
func level(obj *unstructured.Unstructured) int {
	l, err := strconv.Atoi(obj.GetAnnotations()[LevelAnnotation])
	if err != nil {
		return 0
	}
	return l
}

// Template is obj's pod template; nil when it has none.
func Template(obj *unstructured.Unstructured) map[string]any {
	t, _, _ := unstructured.NestedMap(obj.Object, "spec", "template")
	return t
}

// TemplateHash digests want's pod template as rendered.
func TemplateHash(want *unstructured.Unstructured) (string, error) {
	data, err := json.Marshal(Template(want))
	if err != nil {
		return "", err
	}
	return contract.Digest(data), nil
}

// Changes lists the fields of the pod template that differ between two
// forms of one workload as the API server has them (both defaulted), such
// as spec.containers[kube-apiserver].args; containers, volumes and other
// lists of named items are matched by name.
func Changes(current, next *unstructured.Unstructured) []string {
	var out []string
	diff("", Template(current), Template(next), &out)
	if len(out) > maxChanges {
		out = append(out[:maxChanges-1], fmt.Sprintf("and %d more", len(out)-maxChanges+1))
	}
	return out
}

func diff(path string, a, b any, out *[]string) {
	if empty(a) && empty(b) {
		return
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := slices.Sorted(maps.Keys(merge(am, bm)))
		for _, k := range keys {
			diff(join(path, k), am[k], bm[k], out)
		}
		return
	}
	al, aok := named(a)
	bl, bok := named(b)
	if aok && bok {
		for _, name := range slices.Sorted(maps.Keys(merge(al, bl))) {
			diff(path+"["+name+"]", al[name], bl[name], out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, path)
	}
}

// empty tells whether v is absent, null, or an empty object or list, which
// typed objects and the API server's JSON tell apart where pods do not.
func empty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

func merge(a, b map[string]any) map[string]any {
	m := maps.Clone(a)
	if m == nil {
		m = map[string]any{}
	}
	maps.Copy(m, b)
	return m
}

// join adds key to path, bracketed when it is not a plain field name (a
// label or annotation key).
func join(path, key string) string {
	if strings.ContainsAny(key, "./") {
		return path + "[" + key + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// named is a list whose items are objects with distinct names, by name.
func named(v any) (map[string]any, bool) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, false
	}
	byName := map[string]any{}
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, false
		}
		name, ok := m["name"].(string)
		if _, dup := byName[name]; !ok || dup {
			return nil, false
		}
		byName[name] = m
	}
	return byName, true
}
