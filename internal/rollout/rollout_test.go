package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
)

func stamped(annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAnnotations(annotations)
	return u
}

func TestStarted(t *testing.T) {
	old := map[string]string{RenderedByAnnotation: "v1+a", SpecGenerationAnnotation: "3", SpecHashAnnotation: "h3"}
	for _, tc := range []struct {
		name    string
		current map[string]string
		want    map[string]string
		started bool
	}{
		{"same renderer: the spec's or an observation's", old, map[string]string{RenderedByAnnotation: "v1+a", SpecGenerationAnnotation: "3", SpecHashAnnotation: "h3"}, true},
		{"new renderer, same spec", old, map[string]string{RenderedByAnnotation: "v2+a", SpecGenerationAnnotation: "3", SpecHashAnnotation: "h3"}, false},
		{"new renderer, spec changed", old, map[string]string{RenderedByAnnotation: "v2+a", SpecGenerationAnnotation: "4", SpecHashAnnotation: "h4"}, true},
		{"CRD defaults of a new release: the spec as read changed, its generation did not", old, map[string]string{RenderedByAnnotation: "v2+a", SpecGenerationAnnotation: "3", SpecHashAnnotation: "h4"}, false},
		{"rollout.after set for later: the generation changed, the rest of the spec did not", old, map[string]string{RenderedByAnnotation: "v2+a", SpecGenerationAnnotation: "4", SpecHashAnnotation: "h3"}, false},
		{"rendered before stamps existed", nil, map[string]string{RenderedByAnnotation: "v2+a", SpecGenerationAnnotation: "4", SpecHashAnnotation: "h4"}, false},
		{"new renderer, a rotation moved on", old, map[string]string{RenderedByAnnotation: "v2+a", SpecGenerationAnnotation: "3", SpecHashAnnotation: "h3", RotationAnnotation: "service-account-key=TrustingNewKey"}, true},
		{"new renderer, a rotation ended", map[string]string{RenderedByAnnotation: "v1+a", SpecGenerationAnnotation: "3", SpecHashAnnotation: "h3", RotationAnnotation: "service-account-key=DroppingOldKey"}, map[string]string{RenderedByAnnotation: "v2+a", SpecGenerationAnnotation: "3", SpecHashAnnotation: "h3"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.started, Started(stamped(tc.current), stamped(tc.want)))
		})
	}

	// spec.rollout.after reached before the first pass of a new release over
	// a workload (TestClusterctl's add-ons in the workload cluster were held
	// for ever): the user's request, once its time is written into the pod
	// template; one the pods already had is not asked again.
	restarted := func(annotations map[string]string, at string) *unstructured.Unstructured {
		u := stamped(annotations)
		if at != "" {
			require.NoError(t, unstructured.SetNestedField(u.Object, at, "spec", "template", "metadata", "annotations", RestartedAtAnnotation))
		}
		return u
	}
	next := map[string]string{RenderedByAnnotation: "v2+a", SpecGenerationAnnotation: "4", SpecHashAnnotation: "h3"}
	assert.True(t, Started(restarted(nil, ""), restarted(next, "2026-11-26T11:50:13Z")), "rendered before stamps existed")
	assert.True(t, Started(restarted(old, "2026-11-25T10:00:00Z"), restarted(next, "2026-11-26T11:50:13Z")), "a later rollout asked for")
	assert.False(t, Started(restarted(old, "2026-11-26T11:50:13Z"), restarted(next, "2026-11-26T11:50:13Z")), "the pods had that rollout")
}

func TestMustRoll(t *testing.T) {
	assert.True(t, MustRoll(stamped(nil), stamped(map[string]string{LevelAnnotation: "1"})), "unstamped is level 0")
	assert.False(t, MustRoll(stamped(map[string]string{LevelAnnotation: "1"}), stamped(map[string]string{LevelAnnotation: "1"})))
	assert.False(t, MustRoll(stamped(nil), stamped(map[string]string{LevelAnnotation: "0"})))
}

func TestNewStamp(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	cp := &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Generation: 7}}
	cp.Spec.Version = "v1.36.3"
	st, later, err := NewStamp(cp, render.DefaultSettings(), now)
	require.NoError(t, err)
	assert.True(t, later.IsZero())
	assert.Empty(t, st.RestartedAt)
	assert.EqualValues(t, 7, st.Generation)

	cp.Spec.Rollout.After = metav1.NewTime(now.Add(time.Hour))
	future, later, err := NewStamp(cp, render.DefaultSettings(), now)
	require.NoError(t, err)
	assert.Equal(t, now.Add(time.Hour), later.UTC(), "the pass comes back when it is reached")
	assert.Empty(t, future.RestartedAt)
	assert.Equal(t, st.SpecHash, future.SpecHash, "rollout.after is not part of the spec's digest")

	cp.Spec.Rollout.After = metav1.NewTime(now.Add(-time.Minute))
	reached, later, err := NewStamp(cp, render.DefaultSettings(), now)
	require.NoError(t, err)
	assert.True(t, later.IsZero())
	assert.Equal(t, "2026-11-26T11:59:00Z", reached.RestartedAt)

	other := render.DefaultSettings()
	other.TunnelImage = "example.com/tunnel:v2"
	moved, _, err := NewStamp(cp, other, now)
	require.NoError(t, err)
	assert.NotEqual(t, reached.RenderedBy, moved.RenderedBy, "the settings are part of the renderer")
}

func TestStampApply(t *testing.T) {
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}}
	Stamp{RenderedBy: "v1+a", Generation: 2, SpecHash: "h", Level: 1, RestartedAt: "2026-11-26T11:59:00Z"}.Apply(d)
	assert.Equal(t, map[string]string{
		RenderedByAnnotation: "v1+a", SpecGenerationAnnotation: "2", SpecHashAnnotation: "h", LevelAnnotation: "1",
	}, d.Annotations)
	assert.Equal(t, "2026-11-26T11:59:00Z", d.Spec.Template.Annotations[RestartedAtAnnotation])

	api := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "kube-apiserver"}}}
	etcd := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "etcd"}}}
	rotating := Stamp{RenderedBy: "v1+a", Rotation: map[string]string{"kube-apiserver": "service-account-key=TrustingNewKey"}}
	rotating.Apply(api)
	rotating.Apply(etcd)
	assert.Equal(t, "service-account-key=TrustingNewKey", api.Annotations[RotationAnnotation])
	assert.NotContains(t, etcd.Annotations, RotationAnnotation, "only the workloads whose pods use the key")

	unset := &appsv1.StatefulSet{}
	Stamp{RenderedBy: "v1+a"}.Apply(unset)
	assert.Nil(t, unset.Spec.Template.Annotations, "no rollout asked: the pod template stays as rendered")
}

func workload(template map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": template}}}
}

func TestChanges(t *testing.T) {
	current := workload(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{"controlplane.cluster.x-k8s.io/secrets-hash": "a"}, "creationTimestamp": nil},
		"spec": map[string]any{
			"containers": []any{
				map[string]any{"name": "kube-apiserver", "args": []any{"--a=1"}, "image": "k:1"},
				map[string]any{"name": "konnectivity-server", "args": []any{"--b=1"}},
			},
			"volumes": []any{map[string]any{"name": "certs"}},
		},
	})
	next := workload(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{"controlplane.cluster.x-k8s.io/secrets-hash": "b"}},
		"spec": map[string]any{
			"containers": []any{
				map[string]any{"name": "konnectivity-server", "args": []any{"--b=1"}},
				map[string]any{"name": "kube-apiserver", "args": []any{"--a=1", "--c=2"}, "image": "k:1"},
				map[string]any{"name": "tunnel"},
			},
			"volumes": []any{map[string]any{"name": "certs"}},
		},
	})
	assert.Equal(t, []string{
		"metadata.annotations[controlplane.cluster.x-k8s.io/secrets-hash]",
		"spec.containers[kube-apiserver].args",
		"spec.containers[tunnel]",
	}, Changes(current, next))
	assert.Empty(t, Changes(current, current))

	// A release that adds an init container (etcd's wait-for-peers) changes
	// the pod template as any other rendering does, and is held as one.
	withInit := workload(map[string]any{"spec": map[string]any{
		"containers":     []any{map[string]any{"name": "etcd"}},
		"initContainers": []any{map[string]any{"name": "wait-for-peers"}},
	}})
	assert.Equal(t, []string{"spec.initContainers"},
		Changes(workload(map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "etcd"}}}}), withInit))
}

func TestGate(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	g := NewGate(10 * time.Minute)
	g.now = func() time.Time { return now }
	ok, _ := g.Admit("a/one")
	assert.True(t, ok, "the first takes the turn")
	ok, _ = g.Admit("a/one")
	assert.True(t, ok, "and keeps it")
	ok, _ = g.Admit("b/two")
	assert.False(t, ok, "one control plane at a time")
	g.Done("b/two")
	ok, _ = g.Admit("b/two")
	assert.False(t, ok, "only the holder ends its turn")
	g.Done("a/one")
	ok, wait := g.Admit("b/two")
	assert.False(t, ok, "the next starts an interval after the one before")
	assert.Equal(t, 10*time.Minute, wait)
	now = now.Add(10 * time.Minute)
	ok, _ = g.Admit("b/two")
	assert.True(t, ok)
}
