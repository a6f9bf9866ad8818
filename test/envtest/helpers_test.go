package envtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// namespace creates a namespace for one test.
func namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	require.NoError(t, env.Client.Create(testContext(t), ns))
	return ns.Name
}

// manifest parses a YAML manifest as a user would write it.
func manifest(t testing.TB, text string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(strings.TrimSpace(text)), &obj.Object))
	return obj
}

// create sends a manifest to the API server in namespace ns.
func create(t testing.TB, ns, text string) (*unstructured.Unstructured, error) {
	t.Helper()
	obj := manifest(t, text)
	obj.SetNamespace(ns)
	return obj, env.Client.Create(testContext(t), obj)
}

// assertSubset checks that every field of want is in got with the same
// value: what the user wrote is what the API stored.
func assertSubset(t *testing.T, path string, want, got any) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !assert.Truef(t, ok, "%s: stored %v, want an object", path, got) {
			return
		}
		for k, v := range w {
			assertSubset(t, path+"."+k, v, g[k])
		}
	case []any:
		g, ok := got.([]any)
		if !assert.Truef(t, ok && len(g) == len(w), "%s: stored %v, want %v", path, got, want) {
			return
		}
		for i := range w {
			assertSubset(t, path, w[i], g[i])
		}
	default:
		// YAML numbers arrive as float64 and stored ones as int64: compare as written.
		assert.Equalf(t, fmt.Sprint(want), fmt.Sprint(got), "%s", path)
	}
}
