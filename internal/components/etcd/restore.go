package etcd

import (
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// restoreFlags are the flags of etcd that a restore writes into the data
// directory, which the init container takes from the etcd container.
var restoreFlags = []string{"name", "data-dir", "initial-advertise-peer-urls", "initial-cluster-token"}

// restoreContainer is the init container of a control plane with
// spec.etcd.restore, or whose etcd was or is restored in place, which
// restores a member that founds the cluster from the snapshot the
// controller chose (package restore), before etcd starts on its data
// directory. It reads the snapshot from the restore Secret, which the
// controller writes once the snapshot is found: until then the pod does not
// start, so no member starts empty. Environment variables, not a volume,
// carry it, so that the presigned URL renewed rolls no pod.
func restoreContainer(in render.Input, etcd corev1.Container) (corev1.Container, bool) {
	if !restores(in) {
		return corev1.Container{}, false
	}
	c := render.Container("etcd-restore", in.Settings.EtcdRestoreImage, v1alpha1.Container{}, "/etcd-restore", argsOf(etcd, restoreFlags))
	c.Resources = etcd.Resources
	c.Env = slices.Clone(etcd.Env)
	secret := corev1.LocalObjectReference{Name: contract.EtcdRestoreSecretName(in.ClusterName())}
	for _, key := range []string{contract.EtcdRestoreKeyKey, contract.EtcdRestoreURLKey, contract.EtcdRestoreCAKey, contract.EtcdRestoreIDKey} {
		ref := &corev1.SecretKeySelector{LocalObjectReference: secret, Key: key}
		// The store may be trusted by the system's roots, and a restore at
		// creation has no ID.
		if key == contract.EtcdRestoreCAKey || key == contract.EtcdRestoreIDKey {
			ref.Optional = ptr.To(true)
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: key, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref}})
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: claimName, MountPath: dataMount}}
	return c, true
}

// argsOf are the args of the etcd container that set flags, in its order.
func argsOf(etcd corev1.Container, flags []string) []string {
	return slices.DeleteFunc(slices.Clone(etcd.Args), func(arg string) bool {
		return !slices.ContainsFunc(flags, func(flag string) bool { return strings.HasPrefix(arg, "--"+flag+"=") })
	})
}

// restores is whether etcd's pods have the restore init container.
func restores(in render.Input) bool {
	return in.ControlPlane.Spec.Etcd.Restore != nil || in.EtcdRestoreID != "" || in.RestoringEtcd()
}

// restoreStep is how far a restore in place is.
type restoreStep int

const (
	// notRestoring: no restore in place is under way.
	notRestoring restoreStep = iota
	// stopping: pods from before the restore still run, or the restore
	// Secret is not written for it yet; the StatefulSet runs no pod.
	stopping
	// restarting: the members start again on the snapshot, founding a new
	// cluster, until etcd answers with every one of them.
	restarting
	// restored: etcd answers with the voting members spec.etcd.replicas
	// asks for, every one healthy; the controller ends the restore.
	restored
)

// stepOf is how far the restore in place of in is.
func stepOf(in render.Input) restoreStep {
	r := in.ControlPlane.Status.Etcd.Restoring
	switch {
	case r == nil:
		return notRestoring
	case in.EtcdStalePods > 0 || in.EtcdRestoreID != r.ID:
		return stopping
	}
	m := in.Etcd
	if m == nil || !m.Answered || len(m.Members) != int(Replicas(in.ControlPlane)) || len(m.Problems) > 0 {
		return restarting
	}
	for _, member := range m.Members {
		if member.Learner || !member.Healthy {
			return restarting
		}
	}
	return restored
}

// Restored is whether etcd answers with every member it was restored in
// place with, all healthy: the restore is done and the API servers may
// start again.
func Restored(in render.Input) bool { return stepOf(in) == restored }

// restoreProgress says what a restore in place waits for.
func restoreProgress(in render.Input, sts *appsv1.StatefulSet) readiness.Outcome {
	key := in.ControlPlane.Status.Etcd.Restoring.Key
	switch stepOf(in) {
	case stopping:
		if in.EtcdStalePods > 0 {
			return poll(readiness.Waiting(v1alpha1.StoppingForRestoreReason, "stopping the etcd members (%d pods left) to restore them from %s", in.EtcdStalePods, key))
		}
		return poll(readiness.Waiting(v1alpha1.StoppingForRestoreReason, "waiting for the restore Secret to name %s", key))
	case restarting:
		return poll(readiness.Waiting(v1alpha1.RestoringReason, "every etcd member restores %s as it starts: %d of %d ready",
			key, sts.Status.ReadyReplicas, Replicas(in.ControlPlane)))
	}
	return readiness.Waiting(v1alpha1.RestoringReason, "etcd answers with its %d members restored from %s; the API servers start next", Replicas(in.ControlPlane), key)
}

// StalePods counts the etcd pods not started for the restore in place
// named id.
func StalePods(pods []corev1.Pod, id string) int {
	n := 0
	for _, p := range pods {
		if p.Annotations[contract.EtcdRestoreIDAnnotation] != id {
			n++
		}
	}
	return n
}
