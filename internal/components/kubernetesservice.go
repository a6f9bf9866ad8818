package components

import (
	"context"
	"net"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// KubernetesTunnelName is the DaemonSet in kube-system that carries the
// kubernetes Service to the API server in gateway mode.
const KubernetesTunnelName = "kas-tunnel"

// nodeCAFile is where `kubeadm join` writes the cluster CA on each node.
const nodeCAFile = "/etc/kubernetes/pki/ca.crt"

// KubernetesService is what lets pods reach their API server through the
// default/kubernetes Service (CoreDNS and every in-cluster client). The hosted
// API servers run with --endpoint-reconciler-type=none, as their pod
// addresses mean nothing to the workload cluster, so the controller writes the
// Service's EndpointSlice itself:
//
//   - with an IP endpoint (a LoadBalancer, a node port, a ClusterIP the user
//     routes), the endpoint itself;
//
//   - in gateway mode, where one Gateway serves every tenant by SNI and a pod
//     dialling an address sends none, contract.NodeLocalAddress, where a
//     hostNetwork DaemonSet (cmd/tunnel node) listens on every node. kube-proxy
//     DNATs the Service address to it on the pod's own node; the proxy wraps
//     each connection in an outer TLS connection to the Gateway whose SNI is
//     tunnelHost, verified with the cluster CA kubeadm wrote on the node, and
//     the sidecar beside each API server unwraps it (see tunnelServer). The
//     pod's own TLS runs inside, end to end with the API server.
//
//   - with an endpoint that is a name (a load balancer that gives a
//     hostname, as AWS's do, or a ClusterIP endpoint given as a name), the
//     same node-local address and DaemonSet, which forwards each
//     connection to that name as it is (tunnelUpstream).
//
// The same address is written as the Service's Endpoints too, as an API
// server's own endpoint reconciler does: the v1 Endpoints API is
// deprecated but still served, and clients that read it (the conformance
// test of kubernetes.default among them) find the API server there. It
// carries endpointslice.kubernetes.io/skip-mirror, so the controller
// manager does not mirror it into a second EndpointSlice.
//
// An address the API refuses as an endpoint (loopback, link-local) gives
// none: KubernetesService renders no objects.
type KubernetesService struct{}

// Name names its golden file.
func (KubernetesService) Name() string { return "kubernetes-service" }

// Condition reports it.
func (KubernetesService) Condition() string { return v1alpha1.KubernetesServiceReadyCondition }

// Render renders the EndpointSlice and, in gateway mode, the tunnel.
func (KubernetesService) Render(in render.Input) ([]client.Object, error) {
	if upstream, direct, ok := tunnelUpstream(in); ok {
		return append(kubernetesEndpoints(net.ParseIP(contract.NodeLocalAddress), contract.NodeTunnelPort),
			tunnelDaemonSet(in, upstream, direct)), nil
	}
	ip := net.ParseIP(in.Endpoint.Host)
	if ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
		return nil, nil
	}
	return kubernetesEndpoints(ip, in.Endpoint.Port), nil
}

// tunnelUpstream is where the nodes' tunnel carries the kubernetes Service,
// when it does: in gateway mode the tunnel's hostname on the Gateway,
// wrapped in an outer TLS for its SNI; with an endpoint that is a name (a
// load balancer that gives a hostname, as AWS's do, or a ClusterIP
// endpoint given as a name) the endpoint itself, which leads to this
// tenant's API servers alone and so needs no SNI: direct, without the outer
// TLS.
func tunnelUpstream(in render.Input) (upstream string, direct, ok bool) {
	switch {
	case in.Listener != nil:
		return net.JoinHostPort(tunnelHost(in), strconv.Itoa(int(in.Listener.Port))), false, true
	case in.Endpoint.Host != "" && in.Endpoint.Port != 0 && net.ParseIP(in.Endpoint.Host) == nil:
		return net.JoinHostPort(in.Endpoint.Host, strconv.Itoa(int(in.Endpoint.Port))), true, true
	}
	return "", false, false
}

// Ready is rolled out, and a problem when there is nothing to roll out
// because no EndpointSlice can hold the endpoint.
func (KubernetesService) Ready(ctx context.Context, c client.Reader, _ render.Input, applied readiness.Applied) (readiness.Outcome, error) {
	if len(applied.Objects) == 0 {
		return readiness.Problem(v1alpha1.NoServiceEndpointReason,
			"the endpoint's host is an address an EndpointSlice cannot hold (loopback, link-local): pods cannot reach the API server "+
				"through the kubernetes Service; use a load balancer, a node port or an endpoint the workload cluster reaches, or spec.gateway"), nil
	}
	out, err := rolledOut(ctx, c, applied)
	if err != nil || !out.Done {
		return out, err
	}
	said := []string{}
	for _, obj := range applied.Objects {
		switch o := obj.(type) {
		case *discoveryv1.EndpointSlice:
			said = append(said, "EndpointSlice default/kubernetes leads the kubernetes Service to "+
				net.JoinHostPort(o.Endpoints[0].Addresses[0], strconv.Itoa(int(ptr.Deref(o.Ports[0].Port, 0)))))
		case *appsv1.DaemonSet:
			said = append(said, "DaemonSet "+o.Namespace+"/"+o.Name+" carries it to the API server on every node")
		}
	}
	return readiness.Ready(strings.Join(said, "; ")), nil
}

// kubernetesEndpoints are the kubernetes Service's EndpointSlice and
// Endpoints, both leading to ip:port.
func kubernetesEndpoints(ip net.IP, port int32) []client.Object {
	family := discoveryv1.AddressTypeIPv4
	if ip.To4() == nil {
		family = discoveryv1.AddressTypeIPv6
	}
	slice := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"},
		ObjectMeta: workloadMeta(metav1.NamespaceDefault, "kubernetes", map[string]string{
			discoveryv1.LabelServiceName: "kubernetes",
			discoveryv1.LabelManagedBy:   contract.ManagedBy,
		}),
		AddressType: family,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{{
			Name: ptr.To("https"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port),
		}},
	}
	//nolint:staticcheck // v1 Endpoints is deprecated, and still read by clients and the conformance suite.
	endpoints := &corev1.Endpoints{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Endpoints"},
		ObjectMeta: workloadMeta(metav1.NamespaceDefault, "kubernetes", map[string]string{discoveryv1.LabelSkipMirror: "true"}),
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: ip.String()}},
			Ports:     []corev1.EndpointPort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: port}},
		}},
	}
	return []client.Object{slice, endpoints}
}

// tunnelDaemonSet runs the node side of the tunnel on every node, before
// anything else: host network, cluster DNS not needed (the Gateway's name
// resolves through the node's resolver), no service account token, every
// taint tolerated. It runs as root with only NET_ADMIN, which it needs to put
// contract.NodeLocalAddress on a dummy device of its own.
func tunnelDaemonSet(in render.Input, upstream string, direct bool) *appsv1.DaemonSet {
	selector := map[string]string{k8sAppLabel: KubernetesTunnelName}
	health := func(path string, failures int32) *corev1.Probe {
		p := render.Probe(path, contract.NodeTunnelHealthPort, corev1.URISchemeHTTP, failures)
		p.HTTPGet.Host = contract.NodeLocalAddress
		return p
	}
	args := []string{
		"node",
		"--address=" + contract.NodeLocalAddress,
		"--port=" + strconv.Itoa(contract.NodeTunnelPort),
		"--device=" + contract.NodeTunnelDevice,
		"--upstream=" + upstream,
		"--ca-file=" + nodeCAFile,
		"--health-listen=" + net.JoinHostPort(contract.NodeLocalAddress, strconv.Itoa(contract.NodeTunnelHealthPort)),
	}
	if direct {
		args = append(args, "--direct")
	}
	c := render.Container(KubernetesTunnelName, in.Settings.TunnelImage, v1alpha1.Container{}, "/tunnel", args)
	c.SecurityContext.RunAsNonRoot = ptr.To(false)
	c.SecurityContext.RunAsUser = ptr.To[int64](0)
	c.SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
	c.ReadinessProbe = health("/readyz", 3)
	c.LivenessProbe = health("/healthz", 3)
	c.VolumeMounts = []corev1.VolumeMount{{Name: "ca", MountPath: nodeCAFile, ReadOnly: true}}
	pod := corev1.PodSpec{
		HostNetwork:                  true,
		DNSPolicy:                    corev1.DNSDefault,
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		PriorityClassName:            "system-node-critical",
		NodeSelector:                 map[string]string{corev1.LabelOSStable: "linux"},
		Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		SecurityContext:              &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers:                   []corev1.Container{c},
		Volumes: []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: nodeCAFile, Type: ptr.To(corev1.HostPathFile),
		}}}},
	}
	return addonDaemonSet(KubernetesTunnelName, selector, pod)
}
