package controller

import (
	"context"
	"fmt"

	"github.com/blang/semver/v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
)

// updateStatus computes the status from what is observed, in one place.
func (r *Reconciler) updateStatus(ctx context.Context, s *scope) {
	st := &s.hcp.Status
	st.ObservedGeneration = s.hcp.Generation
	st.ExternalManagedControlPlane = ptr.To(true)
	if s.in == nil {
		return
	}
	st.Selector = s.in.SelectorString(components.APIServerComponent)
	st.Etcd.VolumeSize = ptr.To(s.in.EtcdVolumeSize())

	d := &appsv1.Deployment{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: s.in.Namespace(), Name: s.in.APIServerName()}, d); err == nil {
		st.Replicas = ptr.To(d.Status.Replicas)
		st.ReadyReplicas = ptr.To(d.Status.ReadyReplicas)
		st.AvailableReplicas = ptr.To(d.Status.AvailableReplicas)
		st.UpToDateReplicas = ptr.To(d.Status.UpdatedReplicas)
	}
	if version, n := r.runningVersion(ctx, s); n > 0 {
		st.Versions = []clusterv1.StatusVersion{{Version: version, Replicas: n}}
		st.Version = version //nolint:staticcheck // Cluster API's v1beta1 contract still reads it
	}
	st.Etcd.Members = r.etcdMembers(ctx, s)
}

// runningVersion is the oldest version a ready API server pod runs, and how
// many are ready. It moves to a new version only once every ready pod runs it.
func (r *Reconciler) runningVersion(ctx context.Context, s *scope) (string, int32) {
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(s.in.Namespace()),
		client.MatchingLabels(s.in.Selector(components.APIServerComponent))); err != nil {
		return "", 0
	}
	var oldest *semver.Version
	var raw string
	var n int32
	for i := range pods.Items {
		p := &pods.Items[i]
		v, err := v1alpha1.ParseVersion(p.Labels[components.VersionLabel])
		if err != nil || !podReady(p) {
			continue
		}
		n++
		if oldest == nil || v.LT(*oldest) {
			oldest, raw = &v, p.Labels[components.VersionLabel]
		}
	}
	return raw, n
}

// etcdMembers are the members the etcd StatefulSet runs, whether ready or
// not: the running size admission protects.
func (r *Reconciler) etcdMembers(ctx context.Context, s *scope) []string {
	sts := &appsv1.StatefulSet{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: s.in.Namespace(), Name: components.EtcdName(s.in.ClusterName())}, sts); err != nil {
		return s.hcp.Status.Etcd.Members
	}
	names := make([]string, ptr.Deref(sts.Spec.Replicas, 0))
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", sts.Name, i)
	}
	return names
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// probe checks that the API server answers through the admin kubeconfig and
// records it in the Available condition and the initialization status.
func (r *Reconciler) probe(ctx context.Context, s *scope) bool {
	if s.kubeconfig == nil {
		setCondition(s.hcp, v1alpha1.AvailableCondition, metav1.ConditionFalse, v1alpha1.WaitingReason,
			"no kubeconfig to reach the API server with yet")
		return false
	}
	if err := r.prober.Probe(ctx, s.kubeconfig); err != nil {
		setCondition(s.hcp, v1alpha1.AvailableCondition, metav1.ConditionFalse, v1alpha1.NotAnsweringReason,
			"the API server does not answer through the cluster's kubeconfig: "+err.Error())
		return false
	}
	setCondition(s.hcp, v1alpha1.AvailableCondition, metav1.ConditionTrue, v1alpha1.ReadyReason,
		"the API server answers through the cluster's kubeconfig")
	s.hcp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	return true
}
