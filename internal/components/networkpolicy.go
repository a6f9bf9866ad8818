package components

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NetworkPolicies render one ingress policy per component: etcd answers only
// its peers, the API servers and the provider's own namespace; the API
// servers answer everyone on their two ports; the controllers answer no one
// (kubelet probes are not subject to policies).
func NetworkPolicies(in *Input) []client.Object {
	port := func(p int32) networkingv1.NetworkPolicyPort {
		tcp := corev1.ProtocolTCP
		v := intstr.FromInt32(p)
		return networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &v}
	}
	pods := func(component string) networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: in.Selector(component)}}
	}
	etcdClients := []networkingv1.NetworkPolicyPeer{pods(APIServerComponent), pods(EtcdComponent)}
	if ns := in.Settings.ControllerNamespace; ns != "" {
		etcdClients = append(etcdClients, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{corev1.LabelMetadataName: ns},
		}})
	}
	return []client.Object{
		in.networkPolicy(EtcdComponent, []networkingv1.NetworkPolicyIngressRule{
			{From: etcdClients, Ports: []networkingv1.NetworkPolicyPort{port(EtcdClientPort)}},
			{From: []networkingv1.NetworkPolicyPeer{pods(EtcdComponent)}, Ports: []networkingv1.NetworkPolicyPort{port(etcdPeerPort)}},
		}),
		in.networkPolicy(APIServerComponent, []networkingv1.NetworkPolicyIngressRule{
			{Ports: []networkingv1.NetworkPolicyPort{port(APIServerPort), port(KonnectivityPort)}},
		}),
		in.networkPolicy(ControllerManagerComponent, nil),
		in.networkPolicy(SchedulerComponent, nil),
	}
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
