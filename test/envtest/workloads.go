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

// RollOutStatefulSet marks every replica of a StatefulSet's current spec ready.
func RollOutStatefulSet(ctx context.Context, c client.Client, key client.ObjectKey) error {
	return updateStatus(ctx, c, key, &appsv1.StatefulSet{}, func(s *appsv1.StatefulSet) {
		n := ptr.Deref(s.Spec.Replicas, 1)
		rev := fmt.Sprintf("rev-%d", s.Generation)
		s.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: s.Generation, Replicas: n, ReadyReplicas: n, CurrentReplicas: n, UpdatedReplicas: n,
			AvailableReplicas: n, CurrentRevision: rev, UpdateRevision: rev,
		}
	})
}

// RollOutDeployment marks every replica of a Deployment's current spec available.
func RollOutDeployment(ctx context.Context, c client.Client, key client.ObjectKey) error {
	return updateStatus(ctx, c, key, &appsv1.Deployment{}, func(d *appsv1.Deployment) {
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: n, ReadyReplicas: n, UpdatedReplicas: n, AvailableReplicas: n,
		}
	})
}

func updateStatus[T client.Object](ctx context.Context, c client.Client, key client.ObjectKey, obj T, change func(T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, key, obj); err != nil {
			return err
		}
		change(obj)
		return c.Status().Update(ctx, obj)
	})
}
