package render

import (
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

// Flags turns defaults overridden by the user's args into --name=value
// arguments, sorted by name so the rendering is stable.
func Flags(defaults, overrides map[string]string) []string {
	return FlagValues(Values(defaults), overrides)
}

// Values are flags of one value each, as FlagValues takes them.
func Values(flags map[string]string) map[string][]string {
	out := make(map[string][]string, len(flags))
	for name, value := range flags {
		out[name] = []string{value}
	}
	return out
}

// FlagValues is Flags for components that take some flags more than once
// (kube-apiserver's --service-account-key-file): a flag of several values
// is one --name=value each, in the order given. A user's arg replaces every
// value of its flag.
func FlagValues(defaults map[string][]string, overrides map[string]string) []string {
	merged := maps.Clone(defaults)
	maps.Copy(merged, Values(overrides))
	args := make([]string, 0, len(merged))
	for _, name := range slices.Sorted(maps.Keys(merged)) {
		for _, value := range merged[name] {
			args = append(args, "--"+name+"="+value)
		}
	}
	return args
}

// HardenedPod is the pod-level security every component shares: non-root,
// seccomp RuntimeDefault, no service account token, no service links.
func HardenedPod(spec corev1.PodSpec, priorityClass string) corev1.PodSpec {
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

// Container is a hardened container: read-only root filesystem, no
// privilege escalation, every capability dropped. Given a memory limit, its
// Go runtime is given GOMEMLIMIT, nine tenths of it: the heap is collected
// harder as it nears the limit rather than the container killed at it (every
// hosted component and add-on is a Go program).
func Container(name, img string, c v1alpha1.Container, command string, args []string) corev1.Container {
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
	if limit, ok := out.Resources.Limits[corev1.ResourceMemory]; ok {
		out.Env = []corev1.EnvVar{{Name: "GOMEMLIMIT", Value: strconv.FormatInt(limit.Value()/10*9, 10)}}
	}
	return out
}

// WithResources is the user's container c with resources def when the user
// set none: resources the user sets replace the defaults whole.
func WithResources(c v1alpha1.Container, def corev1.ResourceRequirements) v1alpha1.Container {
	if c.Resources == nil {
		c.Resources = &def
	}
	return c
}

// MemoryRequest asks for idle memory and nothing else: about what a
// component holds resident when it runs idle, rounded up, so that the
// scheduler places it where that memory is and the kubelet does not evict
// it first (a pod asking for nothing is BestEffort).
func MemoryRequest(idle string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(idle)}}
}

// SecretVolume mounts Secret Secret read-only at Path, as volume Name.
type SecretVolume struct{ Name, Secret, Path string }

// MountSecrets adds the volumes to the pod and mounts them in container c.
func MountSecrets(spec *corev1.PodSpec, c *corev1.Container, vols ...SecretVolume) {
	for _, v := range vols {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: v.Secret, DefaultMode: ptr.To[int32](0o440)},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: v.Path, ReadOnly: true})
	}
}

// PodTemplate is the template of pod with labels, annotated with the digest
// of every Secret the pod mounts.
func (in Input) PodTemplate(labels map[string]string, pod corev1.PodSpec) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      labels,
			Annotations: map[string]string{SecretsHashAnnotation: in.secretsDigest(&pod)},
		},
		Spec: pod,
	}
}

// secretsDigest digests the content of every Secret the pod mounts, in a
// stable order.
func (in Input) secretsDigest(pod *corev1.PodSpec) string {
	var secrets []string
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secrets = append(secrets, v.Secret.SecretName)
		}
	}
	slices.Sort(secrets)
	lines := make([][]byte, len(secrets))
	for i, s := range secrets {
		lines[i] = []byte(s + "=" + in.SecretDigests[s] + "\n")
	}
	return contract.Digest(lines...)
}

// Probe is an HTTP(S) GET probe of path on port, every ten seconds: gentle
// on a component that runs.
func Probe(path string, port int32, scheme corev1.URIScheme, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(port), Scheme: scheme,
		}},
		PeriodSeconds:    10,
		TimeoutSeconds:   5,
		FailureThreshold: failures,
	}
}

// StartupProbe is an HTTP(S) GET probe of path on port every second, for
// up to window seconds after the container starts: the kubelet runs the
// other probes only once it succeeds, and then the readiness probe at once,
// so that a component is ready within a second of answering rather than at
// the next ten-second tick; once it succeeded it stops.
func StartupProbe(path string, port int32, scheme corev1.URIScheme, window int32) *corev1.Probe {
	p := Probe(path, port, scheme, window)
	p.PeriodSeconds = 1
	return p
}

// Deployment runs pod as component. A new pod is ready before an old one
// goes, so a rollout never leaves fewer than the desired replicas serving.
func (in Input) Deployment(name, component string, replicas int32, labels map[string]string, pod corev1.PodSpec) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: in.Meta(name, component),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: in.Selector(component)},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			}},
			Template: in.PodTemplate(labels, pod),
		},
	}
}

// SpreadAcrossNodes prefers to put the pods of one selector on different nodes.
func SpreadAcrossNodes(selector map[string]string) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
				TopologyKey:   corev1.LabelHostname,
			},
		}},
	}}
}
