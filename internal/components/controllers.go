package components

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
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
	defaults := map[string]string{
		"cluster-name":                     in.ClusterName(),
		"cluster-signing-cert-file":        "/etc/kubernetes/pki/ca/tls.crt",
		"cluster-signing-key-file":         "/etc/kubernetes/pki/ca/tls.key",
		"controllers":                      "*,bootstrapsigner,tokencleaner",
		"root-ca-file":                     "/etc/kubernetes/pki/ca/tls.crt",
		"service-account-private-key-file": "/etc/kubernetes/pki/sa/tls.key",
		"service-cluster-ip-range":         in.ServiceCIDR(),
		"use-service-account-credentials":  "true",
	}
	if cidr := in.PodCIDR(); cidr != "" {
		defaults["allocate-node-cidrs"] = "true"
		defaults["cluster-cidr"] = cidr
	}
	d := in.controllerDeployment(contract.ControllerManagerComponent, in.ControllerManagerName(), spec, defaults,
		controllerManagerPort, in.KubeconfigName(controllerManagerUser), in.ControllerManagerCertSecret(),
		secretVolume{"ca", in.CASecret(), "/etc/kubernetes/pki/ca"},
		secretVolume{"sa", in.SASecret(), "/etc/kubernetes/pki/sa"})
	return []client.Object{in.networkPolicy(contract.ControllerManagerComponent, nil), d}
}

// Scheduler renders the kube-scheduler Deployment.
func Scheduler(in *Input) []client.Object {
	spec := in.ControlPlane.Spec.Deployment.Scheduler
	return []client.Object{in.networkPolicy(contract.SchedulerComponent, nil), in.controllerDeployment(contract.SchedulerComponent, in.SchedulerName(), spec, map[string]string{},
		schedulerPort, in.KubeconfigName(schedulerUser), in.SchedulerCertSecret())}
}

// controllerDeployment is a Deployment of a leader-elected controller that
// talks to the API server with a kubeconfig and client certificate. defaults
// are the component's own flags; those every controller takes are added here.
func (in *Input) controllerDeployment(component, name string, spec v1alpha1.ScalablePod, defaults map[string]string,
	port int32, kubeconfig, cert string, extra ...secretVolume,
) *appsv1.Deployment {
	const kubeconfigFile = "/etc/kubernetes/kubeconfig/kubeconfig"
	for flag, value := range map[string]string{
		"authentication-kubeconfig": kubeconfigFile,
		"authorization-kubeconfig":  kubeconfigFile,
		"kubeconfig":                kubeconfigFile,
		"bind-address":              "0.0.0.0",
		"leader-elect":              "true",
		"profiling":                 "false",
		// Serving certificates are self-generated; they need a writable place.
		"cert-dir": "/tmp",
	} {
		defaults[flag] = value
	}
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

	return in.deployment(name, component, ptr.Deref(spec.Replicas, 2), in.Labels(component), pod)
}
