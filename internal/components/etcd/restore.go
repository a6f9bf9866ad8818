package etcd

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// restoreFlags are the flags of etcd that a restore writes into the data
// directory, which the init container takes from the etcd container.
var restoreFlags = []string{"name", "data-dir", "initial-advertise-peer-urls", "initial-cluster-token"}

// restoreContainer is the init container of a control plane with
// spec.etcd.restore, which restores a member that founds the cluster from
// the snapshot the controller chose (package restore), before etcd starts
// on its data directory. It reads the snapshot from the restore Secret,
// which the controller writes once the snapshot is found: until then the
// pod does not start, so no member starts empty. Environment variables, not
// a volume, carry it, so that the presigned URL renewed rolls no pod.
func restoreContainer(in render.Input, etcd corev1.Container) (corev1.Container, bool) {
	if in.ControlPlane.Spec.Etcd.Restore == nil {
		return corev1.Container{}, false
	}
	args := slices.DeleteFunc(slices.Clone(etcd.Args), func(arg string) bool {
		return !slices.ContainsFunc(restoreFlags, func(flag string) bool { return strings.HasPrefix(arg, "--"+flag+"=") })
	})
	c := render.Container("etcd-restore", in.Settings.EtcdRestoreImage, v1alpha1.Container{}, "/etcd-restore", args)
	c.Resources = etcd.Resources
	c.Env = slices.Clone(etcd.Env)
	secret := corev1.LocalObjectReference{Name: contract.EtcdRestoreSecretName(in.ClusterName())}
	for _, key := range []string{contract.EtcdRestoreKeyKey, contract.EtcdRestoreURLKey, contract.EtcdRestoreCAKey} {
		ref := &corev1.SecretKeySelector{LocalObjectReference: secret, Key: key}
		if key == contract.EtcdRestoreCAKey {
			ref.Optional = ptr.To(true) // the store may be trusted by the system's roots
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: key, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref}})
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: claimName, MountPath: dataMount}}
	return c, true
}
