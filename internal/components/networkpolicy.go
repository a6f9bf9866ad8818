package components

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Each component renders one ingress policy: etcd answers only its peers, the
// API servers and the provider's own namespace; the API servers answer
// everyone on their two ports (three with gateway mode's tunnel); the
// controllers answer no one (kubelet probes are not subject to policies).

func tcpPort(p int32) networkingv1.NetworkPolicyPort {
	tcp := corev1.ProtocolTCP
	v := intstr.FromInt32(p)
	return networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &v}
}

func (in *Input) podsOf(component string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: in.Selector(component)}}
}

func (in *Input) etcdNetworkPolicy() *networkingv1.NetworkPolicy {
	clients := []networkingv1.NetworkPolicyPeer{in.podsOf(contract.APIServerComponent), in.podsOf(contract.EtcdComponent)}
	if ns := in.Settings.ControllerNamespace; ns != "" {
		clients = append(clients, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{corev1.LabelMetadataName: ns},
		}})
	}
	return in.networkPolicy(contract.EtcdComponent, []networkingv1.NetworkPolicyIngressRule{
		{From: clients, Ports: []networkingv1.NetworkPolicyPort{tcpPort(contract.EtcdClientPort)}},
		{From: []networkingv1.NetworkPolicyPeer{in.podsOf(contract.EtcdComponent)}, Ports: []networkingv1.NetworkPolicyPort{tcpPort(etcdPeerPort)}},
	})
}

func (in *Input) apiServerNetworkPolicy() *networkingv1.NetworkPolicy {
	ports := []networkingv1.NetworkPolicyPort{tcpPort(contract.APIServerPort), tcpPort(contract.KonnectivityPort)}
	if in.Listener != nil {
		ports = append(ports, tcpPort(contract.TunnelPort))
	}
	return in.networkPolicy(contract.APIServerComponent, []networkingv1.NetworkPolicyIngressRule{{Ports: ports}})
}

func (in *Input) networkPolicy(component string, ingress []networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: in.meta(in.name(component), component),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: in.Selector(component)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     ingress,
		},
	}
}
