package envtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// namespace creates a namespace for one test. When the test fails, the
// conditions of its control planes, what cert-manager has not issued there
// and the end of the shared controller's log about it are logged: tests
// run side by side, and the rest of that log is theirs.
func namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	c := env.Client
	require.NoError(t, c.Create(testContext(t), ns))
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		hcps := &v1alpha1.HostedControlPlaneList{}
		if err := c.List(context.Background(), hcps, client.InNamespace(ns.Name)); err == nil {
			for _, h := range hcps.Items {
				for _, cond := range h.Status.Conditions {
					t.Logf("%s: %s=%s %s: %.300s", h.Name, cond.Type, cond.Status, cond.Reason, cond.Message)
				}
			}
		}
		logUnissued(t, ns.Name)
		var lines []string
		for _, line := range strings.Split(controller.Output(), "\n") {
			if strings.Contains(line, ns.Name) {
				lines = append(lines, line)
			}
		}
		// A line each, the last controllerLogLines: hack/failures.sh keeps
		// what the test said itself, a log call's first line.
		t.Logf("the controller's log of %s, its last %d lines:", ns.Name, min(len(lines), controllerLogLines))
		for _, line := range lines[max(len(lines)-controllerLogLines, 0):] {
			t.Logf("  %.600s", line)
		}
	})
	return ns.Name
}

// controllerLogLines is how many lines of the controller's log about its
// namespace a failed test logs.
const controllerLogLines = 12

// logUnissued logs, one line each, the Certificates of namespace ns that
// are not Ready or are issuing, and their CertificateRequests: a control
// plane that waits for cert-manager shows what it waits for.
func logUnissued(t testing.TB, ns string) {
	t.Helper()
	certs := &cmv1.CertificateList{}
	requests := &cmv1.CertificateRequestList{}
	if err := env.Client.List(context.Background(), certs, client.InNamespace(ns)); err != nil {
		t.Logf("Certificates of %s not listed: %v", ns, err)
		return
	}
	if err := env.Client.List(context.Background(), requests, client.InNamespace(ns)); err != nil {
		t.Logf("CertificateRequests of %s not listed: %v", ns, err)
	}
	for _, c := range certs.Items {
		var state []string
		unissued := false
		for _, cond := range c.Status.Conditions {
			unissued = unissued || cond.Type == cmv1.CertificateConditionReady && cond.Status != cmmeta.ConditionTrue ||
				cond.Type == cmv1.CertificateConditionIssuing && cond.Status == cmmeta.ConditionTrue
			state = append(state, fmt.Sprintf("%s=%s %s since %s: %.200s", cond.Type, cond.Status, cond.Reason, cond.LastTransitionTime, cond.Message))
		}
		if !unissued && len(c.Status.Conditions) > 0 {
			continue
		}
		t.Logf("Certificate %s (issuer %s, revision %d, failed attempts %d, next key %s): %s", c.Name, c.Spec.IssuerRef.Name,
			ptr.Deref(c.Status.Revision, 0), ptr.Deref(c.Status.FailedIssuanceAttempts, 0), ptr.Deref(c.Status.NextPrivateKeySecretName, "none"),
			strings.Join(state, "; "))
		for _, r := range requests.Items {
			if owner := metav1.GetControllerOf(&r); owner == nil || owner.UID != c.UID {
				continue
			}
			var rs []string
			for _, cond := range r.Status.Conditions {
				rs = append(rs, fmt.Sprintf("%s=%s %s: %.200s", cond.Type, cond.Status, cond.Reason, cond.Message))
			}
			t.Logf("  CertificateRequest %s (created %s, revision %s, key %s): %s", r.Name, r.CreationTimestamp,
				r.Annotations[cmv1.CertificateRequestRevisionAnnotationKey], r.Annotations[cmv1.CertificateRequestPrivateKeyAnnotationKey], strings.Join(rs, "; "))
		}
	}
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

// setStatus changes the status of obj as a controller would, again on a
// conflict: the provider's controller may write the same object meanwhile.
func setStatus[T client.Object](t testing.TB, obj T, change func(T)) {
	t.Helper()
	require.NoError(t, updateStatus(testContext(t), env.Client, client.ObjectKeyFromObject(obj), obj, func(o T) bool {
		change(o)
		return true
	}))
}

// update changes obj as a user would, again when the provider's controller
// wrote it meanwhile; it returns the API server's final answer.
func update[T client.Object](t testing.TB, obj T, change func(T)) error {
	t.Helper()
	ctx := testContext(t)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return env.Client.Update(ctx, obj)
	})
}

// metaItems are the items of a list.
func metaItems(list client.ObjectList) ([]client.Object, error) {
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	objs := make([]client.Object, 0, len(items))
	for _, item := range items {
		objs = append(objs, item.(client.Object))
	}
	return objs, nil
}
