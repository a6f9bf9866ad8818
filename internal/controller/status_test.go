package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Available is true only when the API server answered in the pass, and on
// every other path false with the reason that keeps it from answering.
func TestAvailable(t *testing.T) {
	now := metav1.Now()
	certsPending := &blockedPhase{v1alpha1.CertificatesReadyCondition, readiness.Outcome{Reason: v1alpha1.IssuingReason, Message: "waiting for cert-manager"}}
	noCertManager := &blockedPhase{v1alpha1.CertificatesReadyCondition, readiness.Outcome{Warn: true, Reason: v1alpha1.CertManagerMissingReason, Message: "install cert-manager"}}
	for name, tc := range map[string]struct {
		s                       scope
		status                  metav1.ConditionStatus
		reason, messageContains string
	}{
		"no cluster": {
			s:      scope{},
			status: metav1.ConditionFalse, reason: v1alpha1.WaitingForClusterReason, messageContains: "waiting for the Cluster",
		},
		"deleting": {
			s:      scope{hcp: &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}},
			status: metav1.ConditionFalse, reason: v1alpha1.DeletingReason, messageContains: "being deleted",
		},
		"answers": {
			s:      scope{cluster: &clusterv1.Cluster{}, probed: true},
			status: metav1.ConditionTrue, reason: v1alpha1.ReadyReason, messageContains: "answers",
		},
		// A phase waits (a certificate issued again) while the API server
		// answers: still Available.
		"answers while a phase waits": {
			s:      scope{cluster: &clusterv1.Cluster{}, probed: true, blocked: certsPending},
			status: metav1.ConditionTrue, reason: v1alpha1.ReadyReason, messageContains: "answers",
		},
		// Backups failing (the bucket gone) never make it unavailable.
		"answers while backups fail": {
			s: scope{cluster: &clusterv1.Cluster{}, probed: true, hcp: &v1alpha1.HostedControlPlane{Status: v1alpha1.HostedControlPlaneStatus{
				Conditions: []metav1.Condition{{Type: v1alpha1.BackupReadyCondition, Status: metav1.ConditionFalse, Reason: v1alpha1.BucketNotFoundReason}},
			}}},
			status: metav1.ConditionTrue, reason: v1alpha1.ReadyReason, messageContains: "answers",
		},
		"does not answer": {
			s:      scope{cluster: &clusterv1.Cluster{}, probed: true, answer: errors.New("connection refused")},
			status: metav1.ConditionFalse, reason: v1alpha1.NotAnsweringReason, messageContains: "connection refused",
		},
		"a phase waits before the first answer": {
			s:      scope{cluster: &clusterv1.Cluster{}, blocked: certsPending},
			status: metav1.ConditionFalse, reason: v1alpha1.WaitingReason,
			messageContains: "cannot answer before CertificatesReady: waiting for cert-manager",
		},
		"a bad situation before the first answer": {
			s:      scope{cluster: &clusterv1.Cluster{}, blocked: noCertManager},
			status: metav1.ConditionFalse, reason: v1alpha1.CertManagerMissingReason, messageContains: "install cert-manager",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.s.hcp == nil {
				tc.s.hcp = &v1alpha1.HostedControlPlane{}
			}
			c := available(&tc.s)
			assert.Equal(t, v1alpha1.AvailableCondition, c.Type)
			assert.Equal(t, tc.status, c.Status)
			assert.Equal(t, tc.reason, c.Reason)
			assert.Contains(t, c.Message, tc.messageContains)
		})
	}
}

// apiServerPod is a running API server pod of version, ready or not.
func apiServerPod(name, version string, ready bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{contract.VersionLabel: version}}}
	p.Status.Phase = corev1.PodRunning
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

// The status is computed at the end of a pass from what the pass recorded:
// replica counts from the API server Deployment, the version every ready API
// server pod runs, etcd's members and volume, and the endpoint once served.
func TestUpdateStatus(t *testing.T) {
	pod := apiServerPod
	claim := corev1.PersistentVolumeClaim{}
	claim.Status.Phase = corev1.ClaimBound
	claim.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
	deployment := &appsv1.Deployment{Status: appsv1.DeploymentStatus{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, UpdatedReplicas: 1}}

	hcp := &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
	hcp.Spec.ControlPlaneEndpoint.Host = "api.example.com"
	s := &scope{
		hcp: hcp, cluster: &clusterv1.Cluster{}, probed: true,
		in: render.Input{Observed: render.Observed{
			Endpoint: clusterv1.APIEndpoint{Host: "api.example.com", Port: 31443},
			Etcd: &render.EtcdMembership{Answered: true, Members: []render.EtcdMember{
				{Name: "demo-etcd-0", ID: 0xa, Healthy: true, Leader: true, DBSize: 300 << 20}, {Name: "demo-etcd-1", ID: 0xb, Learner: true, DBSize: 100 << 20},
			}},
			EtcdVolumeCapacity: ptr.To(resource.MustParse("2Gi")),
		}},
		held: map[string]readiness.Outcome{},
		done: map[string]bool{v1alpha1.ExposureReadyCondition: true},
		facts: &facts{
			selector:  "app.kubernetes.io/instance=demo,app.kubernetes.io/name=kube-apiserver",
			apiServer: deployment,
			apiServerPods: &corev1.PodList{Items: []corev1.Pod{
				pod("a", "v1.36.3", true), pod("b", "v1.35.2", true), pod("c", "v1.34.0", false),
			}},
			etcdPods:   &corev1.PodList{Items: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "demo-etcd-1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "demo-etcd-0"}}}},
			etcdClaims: &corev1.PersistentVolumeClaimList{Items: []corev1.PersistentVolumeClaim{claim}},
		},
	}
	updateStatus(s)
	st := hcp.Status
	assert.Equal(t, int64(4), st.ObservedGeneration)
	assert.True(t, *st.ExternalManagedControlPlane)
	assert.True(t, *st.Initialization.ControlPlaneInitialized, "the API server answered")
	assert.Equal(t, "app.kubernetes.io/instance=demo,app.kubernetes.io/name=kube-apiserver", st.Selector)
	assert.Equal(t, []int32{3, 2, 2, 1}, []int32{*st.Replicas, *st.ReadyReplicas, *st.AvailableReplicas, *st.UpToDateReplicas})
	assert.Equal(t, []clusterv1.StatusVersion{{Version: "v1.35.2", Replicas: 2}}, st.Versions, "the oldest a ready pod runs")
	assert.Equal(t, []string{"demo-etcd-0", "demo-etcd-1"}, st.Etcd.Members, "what etcd lists")
	assert.Equal(t, []v1alpha1.EtcdMemberStatus{
		{Name: "demo-etcd-0", ID: "a", Role: v1alpha1.EtcdVoter, Healthy: true},
		{Name: "demo-etcd-1", ID: "b", Role: v1alpha1.EtcdLearner},
	}, st.Etcd.MemberStatuses)
	assert.Equal(t, "2Gi", st.Etcd.VolumeSize.String())
	assert.Equal(t, "300Mi", st.Etcd.VolumeUsage.String(), "the largest database a member reports")
	assert.Equal(t, clusterv1.APIEndpoint{Host: "api.example.com", Port: 31443}, hcp.Spec.ControlPlaneEndpoint, "the node port filled in")
	assert.Equal(t, metav1.ConditionTrue, conditions.Get(hcp, v1alpha1.AvailableCondition).Status)
	assert.Nil(t, conditions.Get(hcp, v1alpha1.CoreDNSReadyCondition), "the workload side says for itself")

	// A pass that could not read what the status counts keeps what it said;
	// one that did not answer says what the workload side waits for.
	s.facts = &facts{selector: st.Selector}
	s.in.Etcd = &render.EtcdMembership{Members: s.in.Etcd.Members} // recorded: etcd did not answer
	s.probed, s.done = false, map[string]bool{}
	s.blocked = &blockedPhase{v1alpha1.EtcdReadyCondition, readiness.Waiting(v1alpha1.ProgressingReason, "rolling")}
	updateStatus(s)
	assert.Equal(t, int32(3), *hcp.Status.Replicas)
	assert.Equal(t, "v1.35.2", hcp.Status.Versions[0].Version)
	assert.Equal(t, []string{"demo-etcd-0", "demo-etcd-1"}, hcp.Status.Etcd.Members)
	assert.False(t, hcp.Status.Etcd.MemberStatuses[0].Healthy, "an etcd that does not answer is healthy no more")
	assert.Equal(t, v1alpha1.WaitingForControlPlaneReason, conditions.Get(hcp, v1alpha1.CoreDNSReadyCondition).Reason)
	assert.Equal(t, v1alpha1.WaitingReason, conditions.Get(hcp, v1alpha1.AvailableCondition).Reason)
}

// Without its Cluster, a control plane says what it waits for and nothing
// else.
func TestUpdateStatusWithoutCluster(t *testing.T) {
	s := &scope{hcp: &v1alpha1.HostedControlPlane{}}
	updateStatus(s)
	assert.Equal(t, v1alpha1.WaitingForClusterReason, conditions.Get(s.hcp, v1alpha1.ClusterReadyCondition).Reason)
	assert.Equal(t, v1alpha1.WaitingForClusterReason, conditions.Get(s.hcp, v1alpha1.AvailableCondition).Reason)
	assert.Nil(t, conditions.Get(s.hcp, v1alpha1.NodeJoinReadyCondition))
	assert.Nil(t, s.hcp.Status.Initialization.ControlPlaneInitialized)
	assert.Empty(t, s.hcp.Status.Selector)
}

// kubectl get hcp's FAILING and REASON come from status.failing: the first
// false condition as Cluster API orders them, Paused never, since it is
// false on every control plane that is not paused (read from the
// conditions themselves, a healthy control plane showed "Paused NotPaused").
func TestFailing(t *testing.T) {
	hcp := &v1alpha1.HostedControlPlane{}
	set := func(t, status, reason string) {
		conditions.Set(hcp, metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason})
	}
	set(clusterv1.PausedCondition, "False", clusterv1.NotPausedReason)
	set(v1alpha1.EtcdReadyCondition, "True", v1alpha1.ReadyReason)
	set(v1alpha1.AvailableCondition, "True", v1alpha1.ReadyReason)
	assert.Nil(t, failing(hcp.Status.Conditions), "a healthy control plane")

	set(v1alpha1.KonnectivityAgentReadyCondition, "False", v1alpha1.ProgressingReason)
	set(v1alpha1.CoreDNSReadyCondition, "Unknown", v1alpha1.ProgressingReason)
	set(v1alpha1.BackupReadyCondition, "False", v1alpha1.SnapshotFailedReason)
	assert.Equal(t, &v1alpha1.FailingCondition{Type: v1alpha1.BackupReadyCondition, Reason: v1alpha1.SnapshotFailedReason}, failing(hcp.Status.Conditions), "the first by name")

	set(v1alpha1.AvailableCondition, "False", v1alpha1.NotAnsweringReason)
	assert.Equal(t, &v1alpha1.FailingCondition{Type: v1alpha1.AvailableCondition, Reason: v1alpha1.NotAnsweringReason}, failing(hcp.Status.Conditions), "Available first")
}
