package etcd

import (
	"strconv"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// input is the Input of a control plane demo/default with the etcd spec.
func input(t *testing.T, etcd v1alpha1.EtcdSpec) render.Input {
	t.Helper()
	cp := &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"}}
	cp.Spec.Version, cp.Spec.Etcd = "v1.36.3", etcd
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"}}
	cluster.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
	in, err := render.NewInput(cp, cluster, render.DefaultSettings())
	require.NoError(t, err)
	return in
}

// The rendered flag follows spec.etcd.volumeSize unless spec.etcd.args sets
// the quota, and EtcdQuotaOf, which the upgrade gates use, says the same.
func TestQuotaFlag(t *testing.T) {
	for name, tc := range map[string]struct {
		volume *resource.Quantity
		args   map[string]string
		want   string
	}{
		"default volume": {want: "738197504"},
		"8Gi":            {volume: ptr.To(resource.MustParse("8Gi")), want: "3758096384"},
		"user quota":     {volume: ptr.To(resource.MustParse("8Gi")), args: map[string]string{"quota-backend-bytes": "4294967296"}, want: "4294967296"},
	} {
		t.Run(name, func(t *testing.T) {
			in := input(t, v1alpha1.EtcdSpec{VolumeSize: tc.volume, Container: v1alpha1.Container{Args: tc.args}})
			assert.Contains(t, statefulSet(in).Spec.Template.Spec.Containers[0].Args, "--quota-backend-bytes="+tc.want)
			assert.Equal(t, tc.want, strconv.FormatInt(contract.EtcdQuotaOf(in.ControlPlane), 10))
		})
	}
}

// One member has no disruption budget: it could only ever allow the one
// member to go.
func TestDisruptionBudgetKeepsQuorum(t *testing.T) {
	for replicas, want := range map[int32]bool{1: false, 3: true, 5: true} {
		objs, err := Component{}.Render(input(t, v1alpha1.EtcdSpec{Replicas: ptr.To(replicas)}))
		require.NoError(t, err)
		var budgets int
		for _, obj := range objs {
			if _, ok := obj.(*policyv1.PodDisruptionBudget); ok {
				budgets++
			}
		}
		assert.Equal(t, want, budgets == 1, "%d members", replicas)
	}
}

// The tag table spans exactly the minor versions admission lets through,
// with an entry of its own for each.
func TestTagsCoverTheSupportedVersions(t *testing.T) {
	minors := map[uint64]bool{}
	for _, e := range versions {
		minors[e.Minor] = true
	}
	for minor := uint64(v1alpha1.MinKubernetesMinor); minor <= v1alpha1.MaxKubernetesMinor; minor++ {
		require.True(t, v1alpha1.IsSupportedVersion(semver.Version{Major: v1alpha1.KubernetesMajor, Minor: minor}))
		assert.True(t, minors[minor], "etcd has no tag for minor %d", minor)
	}
	assert.Equal(t, uint64(v1alpha1.MinKubernetesMinor), versions[0].Minor)
	assert.Equal(t, uint64(v1alpha1.MaxKubernetesMinor), versions[len(versions)-1].Minor)
}

// A running etcd is not resized: the preflight holds a change of
// spec.etcd.replicas, and lets everything else through.
func TestPreflightHoldsMembershipChanges(t *testing.T) {
	in := input(t, v1alpha1.EtcdSpec{Replicas: ptr.To[int32](5)})
	empty := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
	out, err := Component{}.Preflight(t.Context(), empty, in)
	require.NoError(t, err)
	assert.True(t, out.Done, "nothing runs yet")

	running := statefulSet(input(t, v1alpha1.EtcdSpec{}))
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(running).Build()
	out, err = Component{}.Preflight(t.Context(), c, in)
	require.NoError(t, err)
	assert.Equal(t, readiness.Problem(v1alpha1.EtcdMembershipReason,
		"etcd runs 3 members and spec.etcd.replicas asks for 5: changing the members of a running etcd is not supported yet; set spec.etcd.replicas back to 3"), out)

	out, err = Component{}.Preflight(t.Context(), c, input(t, v1alpha1.EtcdSpec{}))
	require.NoError(t, err)
	assert.True(t, out.Done, "the same members")
}

// etcd is ready when every member runs the current spec and is ready; a
// StatefulSet just written is rolling out, whatever the cache says.
func TestReady(t *testing.T) {
	in := input(t, v1alpha1.EtcdSpec{})
	sts := statefulSet(in)
	sts.Generation = 2
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 2, UpdatedReplicas: 3, CurrentRevision: "a", UpdateRevision: "a"}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(sts).WithStatusSubresource(sts).Build()

	out, err := Component{}.Ready(t.Context(), c, in, readiness.Applied{Wrote: true})
	require.NoError(t, err)
	assert.Equal(t, readiness.RollingOut("etcd"), out)

	out, err = Component{}.Ready(t.Context(), c, in, readiness.Applied{})
	require.NoError(t, err)
	assert.Equal(t, readiness.Waiting(v1alpha1.ProgressingReason, "2 of 3 etcd members ready, 3 up to date"), out)

	sts.Status.ReadyReplicas = 3
	require.NoError(t, c.Status().Update(t.Context(), sts))
	out, err = Component{}.Ready(t.Context(), c, in, readiness.Applied{})
	require.NoError(t, err)
	assert.Equal(t, readiness.Ready("3 etcd members ready"), out)
}

// Status reports the members whose pods exist and the smallest volume a
// member was given, from bound claims only.
func TestMembersAndVolumeSize(t *testing.T) {
	pod := func(name string) corev1.Pod { return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	assert.Equal(t, []string{"demo-etcd-0", "demo-etcd-1"}, Members([]corev1.Pod{pod("demo-etcd-1"), pod("demo-etcd-0")}))
	assert.Nil(t, Members(nil))

	claim := func(size string, phase corev1.PersistentVolumeClaimPhase) corev1.PersistentVolumeClaim {
		c := corev1.PersistentVolumeClaim{}
		c.Status.Phase = phase
		if size != "" {
			c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
		}
		return c
	}
	assert.Nil(t, VolumeSize(nil), "no etcd yet")
	assert.Nil(t, VolumeSize([]corev1.PersistentVolumeClaim{claim("", corev1.ClaimPending)}), "nothing bound yet")
	got := VolumeSize([]corev1.PersistentVolumeClaim{
		claim("8Gi", corev1.ClaimBound), claim("4Gi", corev1.ClaimBound), claim("1Gi", corev1.ClaimPending),
	})
	if assert.NotNil(t, got) {
		assert.Equal(t, "4Gi", got.String())
	}
}
