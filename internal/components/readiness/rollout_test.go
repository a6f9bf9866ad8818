package readiness

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

func deployment(name string, replicas int32, st appsv1.DeploymentStatus) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status:     st,
	}
}

// A Deployment has rolled out once the controller has seen its spec and
// every replica is updated and available, with none of an old revision left.
func TestDeploymentProgress(t *testing.T) {
	for name, tc := range map[string]struct {
		status appsv1.DeploymentStatus
		done   bool
		how    string
	}{
		"rolled out":     {appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}, true, ""},
		"spec not seen":  {appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}, false, "2 of 2 available, 2 up to date"},
		"old pod left":   {appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 2, AvailableReplicas: 2}, false, "2 of 2 available, 2 up to date"},
		"one not ready":  {appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 1}, false, "1 of 2 available, 2 up to date"},
		"one not update": {appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 2}, false, "2 of 2 available, 1 up to date"},
	} {
		done, how := DeploymentProgress(deployment("d", 2, tc.status))
		assert.Equal(t, tc.done, done, name)
		assert.Equal(t, tc.how, how, name)
	}
}

func TestDaemonSetProgress(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 4, UpdatedNumberScheduled: 4, NumberAvailable: 4}
	done, _ := DaemonSetProgress(ds)
	assert.True(t, done)
	ds.Status.NumberAvailable = 3
	done, how := DaemonSetProgress(ds)
	assert.False(t, done)
	assert.Equal(t, "3 of 4 nodes available, 4 up to date", how)
	ds.Status.NumberAvailable, ds.Status.ObservedGeneration = 4, 2
	done, _ = DaemonSetProgress(ds)
	assert.False(t, done, "the DaemonSet controller has not seen the spec")
}

// RolledOut judges the workloads among a component's objects and names the
// ones still rolling out; other kinds do not count.
func TestRolledOut(t *testing.T) {
	ready := deployment("ready", 1, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1})
	slow := deployment("slow", 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 1})
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "config"}}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(ready, slow).WithStatusSubresource(ready, slow).Build()

	out, err := RolledOut(t.Context(), c, []client.Object{cm, ready, slow}, KindName)
	require.NoError(t, err)
	assert.Equal(t, Waiting(v1alpha1.ProgressingReason, "Deployment slow: 1 of 2 available, 2 up to date"), out)

	out, err = RolledOut(t.Context(), c, []client.Object{cm, ready}, client.Object.GetName)
	require.NoError(t, err)
	assert.Equal(t, Ready("ready rolled out"), out)

	// Just applied, a workload is not in the cache yet: it rolls out (this
	// was an ApplyFailed warning in every new workload cluster).
	out, err = RolledOut(t.Context(), c, []client.Object{deployment("missing", 1, appsv1.DeploymentStatus{})}, KindName)
	require.NoError(t, err)
	assert.Equal(t, Waiting(v1alpha1.ProgressingReason, "Deployment missing: created, not observed yet"), out)

	broken := interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return errors.New("connection refused")
	}}
	_, err = RolledOut(t.Context(), fake.NewClientBuilder().WithInterceptorFuncs(broken).Build(), []client.Object{ready}, KindName)
	assert.Error(t, err, "a workload that cannot be read is an error, not progress")
}
