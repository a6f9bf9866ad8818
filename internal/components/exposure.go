package components

import (
	"net"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// APIServerServiceName is the Service in front of the API server pods.
func (in *Input) APIServerServiceName() string {
	return contract.APIServerServiceName(in.ClusterName())
}

// KonnectivityHost is where agents reach the konnectivity server: its own
// name on a gateway, the API server's address otherwise.
func (in *Input) KonnectivityHost() string {
	if in.Listener != nil {
		return "konnectivity." + contract.GatewayHost(in.ClusterName(), in.Namespace(), in.Listener.Domain)
	}
	return in.Endpoint.Host
}

// TunnelHost is the outer SNI of the kubernetes Service's tunnel, in
// gateway mode.
func (in *Input) TunnelHost() string {
	return contract.TunnelHost(in.ClusterName(), in.Namespace(), in.Listener.Domain)
}

// Exposure renders how the API server is reached: TLSRoutes through the
// gateway (the API server, konnectivity, and the tunnel that carries the
// workload cluster's kubernetes Service), or a Service of the chosen type.
func Exposure(in *Input) []client.Object {
	svc := in.apiServerService()
	if in.Listener == nil {
		return []client.Object{svc}
	}
	return []client.Object{
		svc,
		in.tlsRoute(in.name("apiserver"), contract.GatewayHost(in.ClusterName(), in.Namespace(), in.Listener.Domain), contract.APIServerPort),
		in.tlsRoute(in.name("konnectivity"), in.KonnectivityHost(), contract.KonnectivityPort),
		in.tlsRoute(in.name("kas-tunnel"), in.TunnelHost(), contract.TunnelPort),
	}
}

// ExposureType is the Service type that serves the API server.
func (in *Input) ExposureType() corev1.ServiceType {
	spec := in.ControlPlane.Spec
	switch {
	case spec.Gateway != nil:
		return corev1.ServiceTypeClusterIP
	case spec.Exposure == nil || spec.Exposure.Type == "":
		return corev1.ServiceTypeLoadBalancer
	default:
		return corev1.ServiceType(spec.Exposure.Type)
	}
}

// ServicePort is the API server Service's port: the Cluster's apiServerPort
// or 6443.
func (in *Input) ServicePort() int32 {
	if p := in.Cluster.Spec.ClusterNetwork.APIServerPort; p != 0 {
		return p
	}
	return contract.APIServerPort
}

func (in *Input) apiServerService() *corev1.Service {
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: in.meta(in.APIServerServiceName(), contract.APIServerComponent),
		Spec: corev1.ServiceSpec{
			Type:     in.ExposureType(),
			Selector: in.Selector(contract.APIServerComponent),
			Ports: []corev1.ServicePort{
				{Name: "https", Port: in.ServicePort(), TargetPort: intstr.FromString("https"), Protocol: corev1.ProtocolTCP},
				{Name: "konnectivity", Port: contract.KonnectivityPort, TargetPort: intstr.FromString("konnectivity"), Protocol: corev1.ProtocolTCP},
			},
		},
	}
	if in.Listener != nil {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: contract.TunnelPortName, Port: contract.TunnelPort, TargetPort: intstr.FromString(contract.TunnelPortName), Protocol: corev1.ProtocolTCP,
		})
	}
	// A NodePort endpoint's port is the node port: the one the user asked
	// for, or the one allocated first and recorded, which then stays.
	if svc.Spec.Type == corev1.ServiceTypeNodePort {
		svc.Spec.Ports[0].NodePort = in.ControlPlane.Spec.ControlPlaneEndpoint.Port
	}
	return svc
}

func (in *Input) tlsRoute(name, host string, port int32) *gatewayv1.TLSRoute {
	gw := in.ControlPlane.Spec.Gateway
	return &gatewayv1.TLSRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "TLSRoute"},
		ObjectMeta: in.meta(name, contract.APIServerComponent),
		Spec: gatewayv1.TLSRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
				Group:       ptr.To(gatewayv1.Group(gatewayv1.GroupName)),
				Kind:        ptr.To(gatewayv1.Kind("Gateway")),
				Name:        gatewayv1.ObjectName(gw.Name),
				Namespace:   ptr.To(gatewayv1.Namespace(gw.Namespace)),
				SectionName: ptr.To(in.Listener.Name),
			}}},
			Hostnames: []gatewayv1.Hostname{gatewayv1.Hostname(host)},
			Rules: []gatewayv1.TLSRouteRule{{BackendRefs: []gatewayv1.BackendRef{{
				BackendObjectReference: gatewayv1.BackendObjectReference{
					Name: gatewayv1.ObjectName(in.APIServerServiceName()),
					Port: ptr.To(port),
				},
			}}}},
		},
	}
}

// ServiceEndpoint reads the endpoint a Service of the exposure type offers:
// the load balancer's address, or the allocated node port with the host the
// user set (empty when unset: the caller picks a node's address), or the
// endpoint the user set for a ClusterIP Service. It reports false while the
// Service has no address or node port yet.
func ServiceEndpoint(cp *v1alpha1.HostedControlPlane, svc *corev1.Service) (host string, port int32, ok bool) {
	user := cp.Spec.ControlPlaneEndpoint
	switch svc.Spec.Type {
	case corev1.ServiceTypeLoadBalancer:
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				return ing.IP, servicePort(svc, "https", false), true
			}
			if ing.Hostname != "" {
				return ing.Hostname, servicePort(svc, "https", false), true
			}
		}
		return "", 0, false
	case corev1.ServiceTypeNodePort:
		port = servicePort(svc, "https", true)
		return user.Host, port, port != 0
	default:
		return user.Host, user.Port, user.Host != ""
	}
}

// KonnectivityServicePort is where agents reach the konnectivity server
// through the exposure Service: its node port for a NodePort Service, its
// port otherwise.
func KonnectivityServicePort(svc *corev1.Service) int32 {
	return servicePort(svc, "konnectivity", svc.Spec.Type == corev1.ServiceTypeNodePort)
}

func servicePort(svc *corev1.Service, name string, node bool) int32 {
	for _, p := range svc.Spec.Ports {
		if p.Name == name {
			if node {
				return p.NodePort
			}
			return p.Port
		}
	}
	return 0
}

// apiServerSANs are every name the API server is reached under: the
// endpoint, the extra certSANs, its Services in both clusters, and loopback.
func (in *Input) apiServerSANs() []string {
	svc, ns := in.APIServerServiceName(), in.Namespace()
	sans := []string{
		in.Endpoint.Host, "localhost", "127.0.0.1",
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + in.ClusterDomain(),
		svc, svc + "." + ns, svc + "." + ns + ".svc",
	}
	if ip := in.kubernetesServiceIP; ip != nil {
		sans = append(sans, ip.String())
	}
	if in.Listener != nil {
		// The kubernetes Service's endpoint on every node (see KubernetesService).
		sans = append(sans, contract.NodeLocalAddress)
	}
	return append(sans, in.ControlPlane.Spec.APIServer.CertSANs...)
}

func (in *Input) konnectivitySANs() []string {
	svc, ns := in.APIServerServiceName(), in.Namespace()
	return []string{in.KonnectivityHost(), svc, svc + "." + ns, svc + "." + ns + ".svc", "localhost", "127.0.0.1"}
}

// etcdSANs name every member (by wildcard), the client Service and loopback.
func (in *Input) etcdSANs() []string {
	ns, peers := in.Namespace(), contract.EtcdPeerServiceName(in.ClusterName())
	return []string{
		"*." + peers + "." + ns + ".svc", "*." + peers, peers + "." + ns + ".svc",
		contract.EtcdName(in.ClusterName()), contract.EtcdServerName(in.ClusterName(), ns),
		"localhost", "127.0.0.1", net.IPv6loopback.String(),
	}
}
