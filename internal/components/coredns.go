package components

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// coreDNSVersions are kubeadm's CoreDNS tags (CoreDNSVersion in
// cmd/kubeadm/app/constants).
var coreDNSVersions = render.MinorTags{
	{Minor: 31, Tag: "v1.11.3"},
	{Minor: 33, Tag: "v1.12.0"},
	{Minor: 34, Tag: "v1.12.1"},
	{Minor: 35, Tag: "v1.13.1"},
	{Minor: 36, Tag: "v1.14.2"},
}

// CoreDNSName is the CoreDNS Deployment, ConfigMap and ServiceAccount in
// kube-system; DNSServiceName its Service, as kubeadm names them.
const (
	CoreDNSName    = "coredns"
	DNSServiceName = "kube-dns"
)

// CoreDNS is the cluster DNS as kubeadm deploys it: its RBAC, the
// Corefile, the Deployment (spec.coredns tunes it) and the kube-dns Service
// at the DNS address kubelets are told to use.
type CoreDNS struct{}

// Name names its golden file.
func (CoreDNS) Name() string { return "coredns" }

// Condition reports it.
func (CoreDNS) Condition() string { return v1alpha1.CoreDNSReadyCondition }

// Ready is rolled out.
func (CoreDNS) Ready(ctx context.Context, c client.Reader, _ render.Input, applied readiness.Applied) (readiness.Outcome, error) {
	return rolledOutOnNodes(ctx, c, applied)
}

// Render renders CoreDNS.
func (CoreDNS) Render(in render.Input) ([]client.Object, error) {
	return []client.Object{
		serviceAccount("kube-system", CoreDNSName),
		clusterRole("system:coredns",
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}}),
		clusterRoleBinding("system:coredns", "system:coredns",
			rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: CoreDNSName, Namespace: "kube-system"}),
		configMap("kube-system", CoreDNSName, map[string]string{"Corefile": corefile(in)}),
		coreDNSDeployment(in),
		dnsService(in),
	}, nil
}

func corefile(in render.Input) string {
	return strings.ReplaceAll(`.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes DOMAIN in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success DOMAIN
       disable denial DOMAIN
    }
    loop
    reload
    loadbalance
}
`, "DOMAIN", in.ClusterDomain())
}

func coreDNSDeployment(in render.Input) *appsv1.Deployment {
	spec := in.ControlPlane.Spec.CoreDNS
	selector := map[string]string{k8sAppLabel: DNSServiceName}
	container := render.WithResources(spec.Container, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("70Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
	})
	c := render.Container(CoreDNSName, render.Image(in.DefaultImage(contract.CoreDNSRepository, coreDNSVersions.For(in.AddonsSemver())), spec.Image),
		container, "/coredns", render.Flags(map[string]string{"conf": "/etc/coredns/Corefile"}, spec.Args))
	// CoreDNS serves on port 53 as a non-root user.
	c.SecurityContext.Capabilities.Add = []corev1.Capability{"NET_BIND_SERVICE"}
	c.SecurityContext.RunAsNonRoot = nil
	c.Ports = []corev1.ContainerPort{
		{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
		{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
		{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP},
		{Name: "liveness-probe", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
		{Name: "readiness-probe", ContainerPort: 8181, Protocol: corev1.ProtocolTCP},
	}
	c.LivenessProbe = &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("liveness-probe")}},
		InitialDelaySeconds: 60, TimeoutSeconds: 5, FailureThreshold: 5,
	}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("readiness-probe")}},
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "config-volume", MountPath: "/etc/coredns", ReadOnly: true}}
	pod := corev1.PodSpec{
		ServiceAccountName: CoreDNSName,
		PriorityClassName:  priorityClass(spec.PriorityClassName, "system-cluster-critical"),
		DNSPolicy:          corev1.DNSDefault,
		NodeSelector:       map[string]string{corev1.LabelOSStable: "linux"},
		Tolerations: []corev1.Toleration{
			{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
			{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
		},
		Affinity:   render.SpreadAcrossNodes(selector),
		Containers: []corev1.Container{c},
		Volumes: []corev1.Volume{{Name: "config-volume", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: CoreDNSName},
			Items:                []corev1.KeyToPath{{Key: "Corefile", Path: "Corefile"}},
		}}}},
	}
	return addonDeployment(CoreDNSName, selector, ptr.Deref(spec.Replicas, 2), pod)
}

func dnsService(in render.Input) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: workloadMeta("kube-system", DNSServiceName, map[string]string{
			k8sAppLabel: DNSServiceName, "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS",
		}),
		Spec: corev1.ServiceSpec{
			ClusterIP: in.DNSIP(),
			Selector:  map[string]string{k8sAppLabel: DNSServiceName},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(53), Protocol: corev1.ProtocolUDP},
				{Name: "dns-tcp", Port: 53, TargetPort: intstr.FromInt32(53), Protocol: corev1.ProtocolTCP},
				{Name: "metrics", Port: 9153, TargetPort: intstr.FromInt32(9153), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}
