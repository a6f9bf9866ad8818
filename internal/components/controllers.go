package components

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// Secure ports the controllers serve health on.
const (
	controllerManagerPort = 10257
	schedulerPort         = 10259
)

// ControllerManagerName and SchedulerName are the controllers' Deployments.
func (in *Input) ControllerManagerName() string { return in.name("controller-manager") }

// SchedulerName is the kube-scheduler Deployment.
func (in *Input) SchedulerName() string { return in.name("scheduler") }

// ControllerManager renders the kube-controller-manager Deployment. It signs
// kubelet certificates with the cluster CA and service account tokens with
// the service account key, so it mounts both.
func ControllerManager(in *Input) []client.Object {
	spec := in.ControlPlane.Spec.Deployment.ControllerManager
	kubeconfig := "/etc/kubernetes/kubeconfig/kubeconfig"
	defaults := map[string]string{
		"authentication-kubeconfig":        kubeconfig,
		"authorization-kubeconfig":         kubeconfig,
		"bind-address":                     "0.0.0.0",
		"cluster-name":                     in.ClusterName(),
		"cluster-signing-cert-file":        "/etc/kubernetes/pki/ca/tls.crt",
		"cluster-signing-key-file":         "/etc/kubernetes/pki/ca/tls.key",
		"controllers":                      "*,bootstrapsigner,tokencleaner",
		"kubeconfig":                       kubeconfig,
		"leader-elect":                     "true",
		"profiling":                        "false",
		"root-ca-file":                     "/etc/kubernetes/pki/ca/tls.crt",
		"service-account-private-key-file": "/etc/kubernetes/pki/sa/tls.key",
		"service-cluster-ip-range":         in.ServiceCIDR(),
		"use-service-account-credentials":  "true",
	}
	if cidr := in.PodCIDR(); cidr != "" {
		defaults["allocate-node-cidrs"] = "true"
		defaults["cluster-cidr"] = cidr
	}
	d := in.controllerDeployment(ControllerManagerComponent, in.ControllerManagerName(), spec, defaults,
		controllerManagerPort, in.KubeconfigName(controllerManagerUser), in.ControllerManagerCertSecret(),
		secretVolume{"ca", in.CASecret(), "/etc/kubernetes/pki/ca"},
		secretVolume{"sa", in.SASecret(), "/etc/kubernetes/pki/sa"})
	return []client.Object{in.networkPolicy(ControllerManagerComponent, nil), d}
}

// Scheduler renders the kube-scheduler Deployment.
func Scheduler(in *Input) []client.Object {
	spec := in.ControlPlane.Spec.Deployment.Scheduler
	kubeconfig := "/etc/kubernetes/kubeconfig/kubeconfig"
	defaults := map[string]string{
		"authentication-kubeconfig": kubeconfig,
		"authorization-kubeconfig":  kubeconfig,
		"bind-address":              "0.0.0.0",
		"kubeconfig":                kubeconfig,
		"leader-elect":              "true",
		"profiling":                 "false",
	}
	return []client.Object{in.networkPolicy(SchedulerComponent, nil), in.controllerDeployment(SchedulerComponent, in.SchedulerName(), spec, defaults,
		schedulerPort, in.KubeconfigName(schedulerUser), in.SchedulerCertSecret())}
}

// controllerDeployment is a Deployment of a leader-elected controller that
// talks to the API server with a kubeconfig and client certificate.
func (in *Input) controllerDeployment(component, name string, spec v1alpha1.ScalablePod, defaults map[string]string,
	port int32, kubeconfig, cert string, extra ...secretVolume,
) *appsv1.Deployment {
	// Serving certificates are self-generated; they need a writable place.
	defaults["cert-dir"] = "/tmp"
	c := container(component, image(in.defaultImage(component, in.ControlPlane.Spec.Version), spec.Image),
		spec.Container, component, flags(defaults, spec.Args))
	c.Ports = []corev1.ContainerPort{{Name: "https", ContainerPort: port}}
	c.LivenessProbe = probe("/healthz", port, corev1.URISchemeHTTPS, 8)
	c.ReadinessProbe = probe("/healthz", port, corev1.URISchemeHTTPS, 3)
	pod := corev1.PodSpec{Affinity: spreadAcrossNodes(in.Selector(component))}
	vols := append([]secretVolume{
		{"kubeconfig", kubeconfig, "/etc/kubernetes/kubeconfig"},
		{"client-cert", cert, kubeconfigCertDir},
	}, extra...)
	mountSecrets(&pod, &c, vols...)
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"})
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	pod.Containers = []corev1.Container{c}
	pod = hardenedPod(pod, spec.PriorityClassName)

	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: in.meta(name, component),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(ptr.Deref(spec.Replicas, 2)),
			Selector: &metav1.LabelSelector{MatchLabels: in.Selector(component)},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      in.Labels(component),
					Annotations: map[string]string{SecretsHashAnnotation: in.secretsHash(&pod)},
				},
				Spec: pod,
			},
		},
	}
}
