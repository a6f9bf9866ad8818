package components

import (
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// SecretsHashAnnotation on a pod template digests the content of the Secrets
// its pods mount, so that new certificates roll the pods.
const SecretsHashAnnotation = "controlplane.cluster.x-k8s.io/secrets-hash"

// nonRootUser is the user every hosted component runs as.
const nonRootUser = 65532

// flags turns defaults overridden by the user's args into --name=value
// arguments, sorted by name so the rendering is stable.
func flags(defaults, overrides map[string]string) []string {
	merged := maps.Clone(defaults)
	maps.Copy(merged, overrides)
	args := make([]string, 0, len(merged))
	for _, name := range slices.Sorted(maps.Keys(merged)) {
		args = append(args, "--"+name+"="+merged[name])
	}
	return args
}

// hardenedPod is the pod-level security every component shares: non-root,
// seccomp RuntimeDefault, no service account token, no service links.
func hardenedPod(spec corev1.PodSpec, priorityClass string) corev1.PodSpec {
	spec.AutomountServiceAccountToken = ptr.To(false)
	spec.EnableServiceLinks = ptr.To(false)
	spec.PriorityClassName = priorityClass
	spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](nonRootUser),
		RunAsGroup:     ptr.To[int64](nonRootUser),
		FSGroup:        ptr.To[int64](nonRootUser),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	return spec
}

// container is a hardened container: read-only root filesystem, no
// privilege escalation, every capability dropped.
func container(name, img string, c v1alpha1.Container, command string, args []string) corev1.Container {
	out := corev1.Container{
		Name:            name,
		Image:           img,
		ImagePullPolicy: ptr.Deref(c.ImagePullPolicy, corev1.PullIfNotPresent),
		Command:         []string{command},
		Args:            args,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	if c.Resources != nil {
		out.Resources = *c.Resources
	}
	return out
}

// secretVolume mounts Secret secret read-only at path in container.
type secretVolume struct{ name, secret, path string }

func mountSecrets(spec *corev1.PodSpec, c *corev1.Container, vols ...secretVolume) {
	for _, v := range vols {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: v.name, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: v.secret, DefaultMode: ptr.To[int32](0o440)},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v.name, MountPath: v.path, ReadOnly: true})
	}
}

// secretsHash digests the content of every Secret the pod mounts, in a
// stable order.
func (in *Input) secretsHash(pod *corev1.PodSpec) string {
	var secrets []string
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secrets = append(secrets, v.Secret.SecretName)
		}
	}
	slices.Sort(secrets)
	lines := make([][]byte, len(secrets))
	for i, s := range secrets {
		lines[i] = []byte(s + "=" + in.SecretHashes[s] + "\n")
	}
	return contract.Digest(lines...)
}

// probe is an HTTP(S) GET probe of path on port.
func probe(path string, port int32, scheme corev1.URIScheme, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(port), Scheme: scheme,
		}},
		PeriodSeconds:    10,
		TimeoutSeconds:   5,
		FailureThreshold: failures,
	}
}

// deployment runs pod as component. A new pod is ready before an old one
// goes, so a rollout never leaves fewer than the desired replicas serving.
func (in *Input) deployment(name, component string, replicas int32, labels map[string]string, pod corev1.PodSpec) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: in.meta(name, component),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: in.Selector(component)},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      labels,
					Annotations: map[string]string{SecretsHashAnnotation: in.secretsHash(&pod)},
				},
				Spec: pod,
			},
		},
	}
}
