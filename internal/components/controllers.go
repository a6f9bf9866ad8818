package components

import (
	"context"
	"strings"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Secure ports the controllers serve health on.
const (
	controllerManagerPort = 10257
	schedulerPort         = 10259
)

// controllerMemory is the memory each controller asks for unless the user
// sets its resources: the leader of an idle control plane held 113 MiB
// resident (controller manager) and 66 MiB (scheduler), one that stands by
// less (2026-11-29, README "What each container asks for").
var controllerMemory = map[string]string{
	contract.ControllerManagerComponent: "128Mi",
	contract.SchedulerComponent:         "80Mi",
}

// ControllerManager is the kube-controller-manager Deployment. It signs
// kubelet certificates with the cluster CA and service account tokens with
// the service account key, so it mounts both.
type ControllerManager struct{}

// Name names its golden file.
func (ControllerManager) Name() string { return "controller-manager" }

// Condition reports it, with the scheduler.
func (ControllerManager) Condition() string { return v1alpha1.ControllersReadyCondition }

// ControllerManagerName is its Deployment.
func ControllerManagerName(in render.Input) string { return in.Name("controller-manager") }

func controllerManagerCertSecret(in render.Input) string { return in.Name("controller-manager") }

// Certificates are its client certificate.
func (ControllerManager) Certificates(in render.Input) []*cmv1.Certificate {
	return []*cmv1.Certificate{in.ClientCertificate(controllerManagerCertSecret(in), in.ClusterAuthority().Issuer(), "system:kube-controller-manager")}
}

// Render renders its Deployment and network policy.
func (ControllerManager) Render(in render.Input) ([]client.Object, error) {
	spec := in.ControlPlane.Spec.Deployment.ControllerManager
	defaults := map[string]string{
		"cluster-name":                    in.ClusterName(),
		"cluster-signing-cert-file":       "/etc/kubernetes/pki/ca/tls.crt",
		"cluster-signing-key-file":        "/etc/kubernetes/pki/ca/tls.key",
		"controllers":                     "*,bootstrapsigner,tokencleaner",
		"root-ca-file":                    "/etc/kubernetes/pki/ca/tls.crt",
		"service-cluster-ip-range":        in.ServiceCIDR(),
		"use-service-account-credentials": "true",
	}
	// It signs the tokens of service account token Secrets.
	_, sign := ServiceAccountKeys(in)
	key := saVolume(in, sign)
	defaults[saPrivateKeyFlag] = key.Path + "/" + corev1.TLSPrivateKeyKey
	if cidr := in.PodCIDR(); cidr != "" {
		defaults["allocate-node-cidrs"] = "true"
		defaults["cluster-cidr"] = cidr
	}
	d := controllerDeployment(in, contract.ControllerManagerComponent, ControllerManagerName(in), spec, defaults,
		controllerManagerPort, kubeconfigName(in, controllerManagerUser), controllerManagerCertSecret(in),
		// It signs the kubelets' client certificates with the CA that issues
		// the control plane's, the new one from a rotation's IssuingFromNewCA.
		render.SecretVolume{Name: "ca", Secret: in.ClusterAuthority().Issuer(), Path: pkiDir + "/ca"}, key)
	return append(controllerNetworkPolicies(in, contract.ControllerManagerComponent), d), nil
}

// Ready is done when its Deployment has rolled out.
func (ControllerManager) Ready(ctx context.Context, c client.Reader, _ render.Input, applied readiness.Applied) (readiness.Outcome, error) {
	if applied.Wrote {
		return readiness.RollingOut("the controller manager"), nil
	}
	return readiness.RolledOut(ctx, c, applied.Objects, client.Object.GetName)
}

// Scheduler is the kube-scheduler Deployment.
type Scheduler struct{}

// Name names its golden file.
func (Scheduler) Name() string { return "scheduler" }

// Condition reports it, with the controller manager.
func (Scheduler) Condition() string { return v1alpha1.ControllersReadyCondition }

// SchedulerName is its Deployment.
func SchedulerName(in render.Input) string { return in.Name("scheduler") }

func schedulerCertSecret(in render.Input) string { return in.Name("scheduler") }

// Certificates are its client certificate.
func (Scheduler) Certificates(in render.Input) []*cmv1.Certificate {
	return []*cmv1.Certificate{in.ClientCertificate(schedulerCertSecret(in), in.ClusterAuthority().Issuer(), "system:kube-scheduler")}
}

// Render renders its Deployment and network policy.
func (Scheduler) Render(in render.Input) ([]client.Object, error) {
	spec := in.ControlPlane.Spec.Deployment.Scheduler
	return append(controllerNetworkPolicies(in, contract.SchedulerComponent), controllerDeployment(in, contract.SchedulerComponent, SchedulerName(in), spec, map[string]string{},
		schedulerPort, kubeconfigName(in, schedulerUser), schedulerCertSecret(in))), nil
}

// Ready is done when its Deployment has rolled out.
func (Scheduler) Ready(ctx context.Context, c client.Reader, _ render.Input, applied readiness.Applied) (readiness.Outcome, error) {
	if applied.Wrote {
		return readiness.RollingOut("the scheduler"), nil
	}
	return readiness.RolledOut(ctx, c, applied.Objects, client.Object.GetName)
}

// controllerNetworkPolicies: the controller manager and the scheduler
// answer no one (their ports serve kubelet probes) and reach only their API
// servers, through the Service their kubeconfig names, and DNS to resolve
// it.
func controllerNetworkPolicies(in render.Input, component string) []client.Object {
	return in.NetworkPolicies(component, render.Traffic{Egress: []networkingv1.NetworkPolicyEgressRule{
		{To: []networkingv1.NetworkPolicyPeer{in.PodsOf(contract.APIServerComponent)}, Ports: []networkingv1.NetworkPolicyPort{render.TCPPort(contract.APIServerPort)}},
		render.DNS(),
	}})
}

// controllerDeployment is a Deployment of a leader-elected controller that
// talks to the API server with a kubeconfig and client certificate. defaults
// are the component's own flags; those every controller takes are added here.
func controllerDeployment(in render.Input, component, name string, spec v1alpha1.ScalablePod, defaults map[string]string,
	port int32, kubeconfig, cert string, extra ...render.SecretVolume,
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
	c := render.Container(component, render.Image(in.DefaultImage(component, in.ControlPlane.Spec.Version), spec.Image),
		render.WithResources(spec.Container, render.MemoryRequest(controllerMemory[component])), component, render.Flags(defaults, spec.Args))
	c.Ports = []corev1.ContainerPort{{Name: "https", ContainerPort: port}}
	c.LivenessProbe = render.Probe("/healthz", port, corev1.URISchemeHTTPS, 8)
	c.ReadinessProbe = render.Probe("/healthz", port, corev1.URISchemeHTTPS, 3)
	c.StartupProbe = render.StartupProbe("/healthz", port, corev1.URISchemeHTTPS, 300)
	pod := corev1.PodSpec{Affinity: render.SpreadAcrossNodes(in.Selector(component))}
	vols := append([]render.SecretVolume{
		{Name: "kubeconfig", Secret: kubeconfig, Path: "/etc/kubernetes/kubeconfig"},
		{Name: "client-cert", Secret: cert, Path: kubeconfigCertDir},
	}, extra...)
	render.MountSecrets(&pod, &c, vols...)
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"})
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	pod.Containers = []corev1.Container{c}
	pod = render.HardenedPod(pod, spec.PriorityClassName)

	return in.Deployment(name, component, in.Stoppable(controllerReplicas(in.ControlPlane, spec)), in.Labels(component), pod)
}

// controllerReplicas is how many controller managers or schedulers run:
// spec's replicas, or when unset two, but one beside a single API server.
// A second one only stands by for the lease, and what it would spare, a new
// pod's start after its node is lost, does not matter where the lone API
// server is lost with it.
func controllerReplicas(cp *v1alpha1.HostedControlPlane, spec v1alpha1.ScalablePod) int32 {
	if spec.Replicas != nil {
		return *spec.Replicas
	}
	return min(2, max(1, APIServerReplicas(cp)))
}

// DefaultKubeletCertificateLifetime is the lifetime of the kubelet client
// certificates the controller manager signs, unless its
// --cluster-signing-duration says otherwise: its own default.
const DefaultKubeletCertificateLifetime = 365 * 24 * time.Hour

// KubeletCertificateLifetime is the longest lifetime of a kubelet client
// certificate the controller manager signs: its --cluster-signing-duration,
// as spec.deployment.controllerManager.args sets it, or its default.
func KubeletCertificateLifetime(in render.Input) time.Duration {
	for name, value := range in.ControlPlane.Spec.Deployment.ControllerManager.Args {
		if strings.ReplaceAll(name, "_", "-") != "cluster-signing-duration" {
			continue
		}
		if d, err := time.ParseDuration(value); err == nil && d > 0 {
			return d
		}
	}
	return DefaultKubeletCertificateLifetime
}
