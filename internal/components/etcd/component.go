package etcd

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Component is the hosted etcd: its members, its Services, its disruption
// budget and network policy. Its certificates are issued with the others
// (see Certificates), before any member starts. Clients reach the running
// etcd to change its membership and keep its databases, Writer deletes the
// pod and volume of a member replaced and grows the volumes, Storage reads
// their StorageClass (not ours, so past the label-scoped cache), and Events
// tell what was done; without them (rendering alone) nothing is changed.
type Component struct {
	Clients *Checker
	Writer  client.Writer
	Storage client.Reader
	Events  events.EventRecorder
}

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
	objs := append(networkPolicies(in), clientService(in), peerService(in), membersConfigMap(in), statefulSet(in))
	if pods(in) > 1 {
		objs = append(objs, disruptionBudget(in))
	}
	return objs, nil
}

// Prunes names the kinds of objects it renders only sometimes: the
// disruption budget goes when one member is left.
func (Component) Prunes() (string, []client.ObjectList) {
	return contract.EtcdComponent, []client.ObjectList{&policyv1.PodDisruptionBudgetList{}}
}

// Ready is done when every member runs the current spec and is ready, and
// etcd has the voting members spec.etcd.replicas asks for and no learner.
// A member down says why (see downMembers).
func (Component) Ready(ctx context.Context, c client.Reader, in render.Input, applied readiness.Applied) (readiness.Outcome, error) {
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: in.Namespace(), Name: contract.EtcdName(in.ClusterName())}, sts); err != nil && !applied.Wrote {
		return readiness.Outcome{}, err
	}
	if in.RestoringEtcd() {
		return restoreProgress(in, sts), nil
	}
	if applied.Wrote {
		return readiness.RollingOut("etcd"), nil
	}
	// A membership change comes first: what it waits for (a learner to
	// catch up) no watch reports, and its pods are not ready until then.
	if out, changing := membershipProgress(in); changing {
		return out, nil
	}
	if out, growing := volumesGrowing(in); growing {
		return resizing(ctx, c, in, out)
	}
	if out, down := downMembers(in, sts, time.Now()); down {
		return out, nil
	}
	want := pods(in)
	st := sts.Status
	if st.ObservedGeneration < sts.Generation || st.UpdatedReplicas != want || st.ReadyReplicas != want ||
		st.Replicas != want || (st.UpdateRevision != "" && st.CurrentRevision != st.UpdateRevision) {
		return readiness.Waiting(v1alpha1.ProgressingReason, "%d of %d etcd members ready, %d up to date",
			st.ReadyReplicas, want, st.UpdatedReplicas), nil
	}
	return readiness.Ready(fmt.Sprintf("%d etcd members ready", want)), nil
}
