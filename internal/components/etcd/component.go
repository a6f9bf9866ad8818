package etcd

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Component is the hosted etcd: its members, its Services, its disruption
// budget and network policy. Its certificates are issued with the others
// (see Certificates), before any member starts.
type Component struct{}

// Name names its golden file.
func (Component) Name() string { return "etcd" }

// Condition reports it.
func (Component) Condition() string { return v1alpha1.EtcdReadyCondition }

// Replicas is the number of etcd members the spec asks for.
func Replicas(cp *v1alpha1.HostedControlPlane) int32 { return ptr.Deref(cp.Spec.Etcd.Replicas, 3) }

// Render renders a StatefulSet of members with persistent volumes, the
// headless Service that names them, the client Service, its network policy
// and, with more than one member, a PodDisruptionBudget that keeps quorum.
func (Component) Render(in render.Input) ([]client.Object, error) {
	objs := []client.Object{networkPolicy(in), clientService(in), peerService(in), statefulSet(in)}
	if Replicas(in.ControlPlane) > 1 {
		objs = append(objs, disruptionBudget(in))
	}
	return objs, nil
}

// Prunes names the kinds of objects it renders only sometimes: the
// disruption budget goes when one member is left.
func (Component) Prunes() (string, []client.ObjectList) {
	return contract.EtcdComponent, []client.ObjectList{&policyv1.PodDisruptionBudgetList{}}
}

// Preflight refuses to resize a running etcd: new members must be added to
// the cluster before they start, and removed members removed from it, which
// this controller does not do yet. Scaling the StatefulSet alone would break
// quorum or start members that cannot join.
func (Component) Preflight(ctx context.Context, c client.Reader, in render.Input) (readiness.Outcome, error) {
	sts := &appsv1.StatefulSet{}
	err := c.Get(ctx, client.ObjectKey{Namespace: in.Namespace(), Name: contract.EtcdName(in.ClusterName())}, sts)
	if apierrors.IsNotFound(err) {
		return readiness.Ready(""), nil // nothing runs yet
	}
	if err != nil {
		return readiness.Outcome{}, fmt.Errorf("read the etcd StatefulSet: %w", err)
	}
	have, want := ptr.Deref(sts.Spec.Replicas, 0), Replicas(in.ControlPlane)
	if have == want {
		return readiness.Ready(""), nil
	}
	return readiness.Problem(v1alpha1.EtcdMembershipReason,
		"etcd runs %d members and spec.etcd.replicas asks for %d: changing the members of a running etcd is not supported yet; set spec.etcd.replicas back to %d",
		have, want, have), nil
}

// Ready is done when every member runs the current spec and is ready.
func (Component) Ready(ctx context.Context, c client.Reader, in render.Input, applied readiness.Applied) (readiness.Outcome, error) {
	if applied.Wrote {
		return readiness.RollingOut("etcd"), nil
	}
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: in.Namespace(), Name: contract.EtcdName(in.ClusterName())}, sts); err != nil {
		return readiness.Outcome{}, err
	}
	want := Replicas(in.ControlPlane)
	st := sts.Status
	if st.ObservedGeneration < sts.Generation || st.UpdatedReplicas != want || st.ReadyReplicas != want ||
		st.Replicas != want || (st.UpdateRevision != "" && st.CurrentRevision != st.UpdateRevision) {
		return readiness.Waiting(v1alpha1.ProgressingReason, "%d of %d etcd members ready, %d up to date",
			st.ReadyReplicas, want, st.UpdatedReplicas), nil
	}
	return readiness.Ready(fmt.Sprintf("%d etcd members ready", want)), nil
}
