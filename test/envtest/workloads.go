package envtest

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// envtest runs no kube-controller-manager, scheduler or kubelet. Where a
// test needs workloads to have rolled out, it plays them: these write the
// status their controllers would once every pod of the new spec runs.

// RollOutStatefulSet marks every replica of a StatefulSet's current spec
// ready, unless that is already so.
func RollOutStatefulSet(ctx context.Context, c client.Client, key client.ObjectKey) error {
	return updateStatus(ctx, c, key, &appsv1.StatefulSet{}, func(s *appsv1.StatefulSet) bool {
		if s.Status.ObservedGeneration == s.Generation && s.Status.ReadyReplicas == ptr.Deref(s.Spec.Replicas, 1) &&
			s.Status.CurrentRevision == s.Status.UpdateRevision && s.Status.UpdateRevision != "" {
			return false
		}
		n := ptr.Deref(s.Spec.Replicas, 1)
		rev := fmt.Sprintf("rev-%d", s.Generation)
		s.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: s.Generation, Replicas: n, ReadyReplicas: n, CurrentReplicas: n, UpdatedReplicas: n,
			AvailableReplicas: n, CurrentRevision: rev, UpdateRevision: rev,
		}
		return true
	})
}

// RollOutDeployment marks every replica of a Deployment's current spec
// available, unless that is already so.
func RollOutDeployment(ctx context.Context, c client.Client, key client.ObjectKey) error {
	return updateStatus(ctx, c, key, &appsv1.Deployment{}, func(d *appsv1.Deployment) bool {
		if d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == ptr.Deref(d.Spec.Replicas, 1) &&
			d.Status.UpdatedReplicas == d.Status.AvailableReplicas {
			return false
		}
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: n, ReadyReplicas: n, UpdatedReplicas: n, AvailableReplicas: n,
		}
		return true
	})
}

// RollOutDaemonSet marks a DaemonSet's current spec available on every node
// it wants, as its controller would; with no nodes it wants none.
func RollOutDaemonSet(ctx context.Context, c client.Client, key client.ObjectKey) error {
	return updateStatus(ctx, c, key, &appsv1.DaemonSet{}, func(d *appsv1.DaemonSet) bool {
		if d.Status.ObservedGeneration == d.Generation {
			return false
		}
		n := d.Status.DesiredNumberScheduled
		d.Status = appsv1.DaemonSetStatus{
			ObservedGeneration: d.Generation, DesiredNumberScheduled: n, CurrentNumberScheduled: n,
			UpdatedNumberScheduled: n, NumberAvailable: n, NumberReady: n,
		}
		return true
	})
}

// updateStatus writes the status of the object at key when change says it
// changed it, again on a conflict.
func updateStatus[T client.Object](ctx context.Context, c client.Client, key client.ObjectKey, obj T, change func(T) bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, key, obj); err != nil {
			return err
		}
		if !change(obj) {
			return nil
		}
		return c.Status().Update(ctx, obj)
	})
}
