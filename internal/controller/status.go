package controller

import (
	"context"
	"fmt"
	"slices"

	"github.com/blang/semver/v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// updateStatus computes the status from what is observed, in one place.
func (r *Reconciler) updateStatus(ctx context.Context, s *scope) {
	st := &s.hcp.Status
	st.ObservedGeneration = s.hcp.Generation
	st.ExternalManagedControlPlane = ptr.To(true)
	c := available(s)
	setCondition(s.hcp, c.Type, c.Status, c.Reason, c.Message)
	if s.in == nil {
		return
	}
	st.Selector = s.in.SelectorString(contract.APIServerComponent)

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
	r.observeEtcd(ctx, s)
}

// runningVersion is the oldest version a ready API server pod runs, and how
// many are ready. It moves to a new version only once every ready pod runs it.
func (r *Reconciler) runningVersion(ctx context.Context, s *scope) (string, int32) {
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(s.in.Namespace()),
		client.MatchingLabels(s.in.Selector(contract.APIServerComponent))); err != nil {
		return "", 0
	}
	var oldest *semver.Version
	var raw string
	var n int32
	for i := range pods.Items {
		p := &pods.Items[i]
		v, err := v1alpha1.ParseVersion(p.Labels[contract.VersionLabel])
		if err != nil || !podReady(p) {
			continue
		}
		n++
		if oldest == nil || v.LT(*oldest) {
			oldest, raw = &v, p.Labels[contract.VersionLabel]
		}
	}
	return raw, n
}

// observeEtcd reports the etcd members whose pods exist, ready or not (the
// running size admission protects), and the smallest volume a member has
// been given. An etcd that does not exist yet reports nothing; one whose
// objects cannot be read keeps what was reported before.
func (r *Reconciler) observeEtcd(ctx context.Context, s *scope) {
	st, mine := &s.hcp.Status.Etcd, []client.ListOption{
		client.InNamespace(s.in.Namespace()), client.MatchingLabels(s.in.Selector(contract.EtcdComponent)),
	}
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, mine...); err == nil {
		st.Members = nil
		for _, p := range pods.Items {
			st.Members = append(st.Members, p.Name)
		}
		slices.Sort(st.Members)
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.client.List(ctx, claims, mine...); err == nil {
		st.VolumeSize = smallestCapacity(claims.Items)
	}
}

// smallestCapacity is the smallest storage capacity among bound claims, nil
// when none is bound.
func smallestCapacity(claims []corev1.PersistentVolumeClaim) *resource.Quantity {
	var smallest *resource.Quantity
	for _, c := range claims {
		q, ok := c.Status.Capacity[corev1.ResourceStorage]
		if !ok || c.Status.Phase != corev1.ClaimBound {
			continue
		}
		if smallest == nil || q.Cmp(*smallest) < 0 {
			smallest = &q
		}
	}
	return smallest
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

// probe asks the API server for /readyz through the admin kubeconfig: the
// one this pass wrote, or, when the pass stopped before writing it, the one
// written before, which still reaches the API server.
func (r *Reconciler) probe(ctx context.Context, s *scope) {
	s.probed = true
	kubeconfig := s.kubeconfig
	if kubeconfig == nil {
		secret := &corev1.Secret{}
		key := client.ObjectKey{Namespace: s.hcp.Namespace, Name: contract.ClusterKubeconfigName(s.cluster.Name)}
		if err := r.client.Get(ctx, key, secret); err != nil {
			s.answer = fmt.Errorf("no kubeconfig to reach the API server with: %w", err)
			return
		}
		kubeconfig = secret.Data["value"]
	}
	s.answer = r.prober.Probe(ctx, kubeconfig)
	if s.answer == nil {
		s.hcp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	}
}

// available derives the Available condition from what the pass observed:
// true only when the API server answered, and otherwise false with the
// reason that keeps it from answering.
func available(s *scope) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.AvailableCondition, Status: metav1.ConditionFalse}
	switch {
	case !s.hcp.DeletionTimestamp.IsZero():
		c.Reason, c.Message = v1alpha1.DeletingReason, "the control plane is being deleted"
	case s.cluster == nil:
		c.Reason, c.Message = v1alpha1.WaitingForClusterReason, "waiting for the Cluster that owns this control plane"
	case s.answered():
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ReadyReason, "the API server answers through the cluster's kubeconfig"
	case s.probed:
		c.Reason, c.Message = v1alpha1.NotAnsweringReason, "the API server does not answer through the cluster's kubeconfig: "+s.answer.Error()
	case s.blocked != nil:
		c.Reason = v1alpha1.WaitingReason
		if s.blocked.Warn {
			c.Reason = s.blocked.Reason
		}
		c.Message = fmt.Sprintf("the API server cannot answer before %s: %s", s.blocked.condition, s.blocked.Message)
	default:
		c.Reason, c.Message = v1alpha1.WaitingReason, "waiting for the control plane to be reconciled"
	}
	return c
}
