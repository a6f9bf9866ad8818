package render

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilsnet "k8s.io/utils/net"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Traffic is what a component's pods answer and what they reach. Kubelet
// probes come from the node, which every policy engine admits, so a
// component that answers no one has no ingress rules.
type Traffic struct {
	Ingress []networkingv1.NetworkPolicyIngressRule
	Egress  []networkingv1.NetworkPolicyEgressRule
}

// NetworkPolicies are the policies of component's pods: a NetworkPolicy
// that admits the traffic and denies everything else, both ways, and, where
// Cilium's CRDs are served, a CiliumNetworkPolicy beside it that denies what
// a NetworkPolicy cannot name (see CiliumNetworkPolicy).
func (in Input) NetworkPolicies(component string, t Traffic) []client.Object {
	objs := []client.Object{&networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: in.Meta(in.Name(component), component),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: in.Selector(component)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     t.Ingress,
			Egress:      t.Egress,
		},
	}}
	if in.Cilium {
		objs = append(objs, in.CiliumNetworkPolicy(component))
	}
	return objs
}

// PodsOf is a policy peer: the pods of component.
func (in Input) PodsOf(component string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: in.Selector(component)}}
}

// ControllerPeer is a policy peer: the pods of the controller's namespace,
// where the controller and the extension run; nil when the controller does
// not know its namespace.
func (in Input) ControllerPeer() []networkingv1.NetworkPolicyPeer {
	ns := in.Settings.ControllerNamespace
	if ns == "" {
		return nil
	}
	return []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{corev1.LabelMetadataName: ns},
	}}}
}

// TCPPort is a policy port.
func TCPPort(p int32) networkingv1.NetworkPolicyPort {
	return port(corev1.ProtocolTCP, p)
}

func port(proto corev1.Protocol, p int32) networkingv1.NetworkPolicyPort {
	v := intstr.FromInt32(p)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v}
}

// DNS is the egress rule for name lookups: port 53 over UDP and TCP, to
// any address. Every hosted component finds its peers by Service name, and
// where the resolver runs is the platform's choice (CoreDNS pods, a node
// local cache on a link-local address, a resolver outside the cluster), so
// only the port is pinned. Neither the management API server nor a
// metadata service answers on it.
func DNS() networkingv1.NetworkPolicyEgressRule {
	return networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{
		port(corev1.ProtocolUDP, 53), port(corev1.ProtocolTCP, 53),
	}}
}

// Link-local ranges, where clouds serve instance metadata and credentials
// (169.254.169.254, AWS's fd00:ec2::254 is in fd00::/8 and named apart).
const (
	linkLocalIPv4 = "169.254.0.0/16"
	linkLocalIPv6 = "fe80::/10"
	awsMetadataV6 = "fd00:ec2::254/128"
)

// Outside is an egress rule to any address but the link-local ranges, the
// cloud metadata addresses and the management API server's addresses the
// controller knows (Settings.ManagementAPIServer), on ports (every TCP port
// when none). A NetworkPolicy cannot name the management cluster's pods and
// nodes apart from the rest of the world; those that must not be reached
// from here have policies of their own (every hosted etcd admits only its
// own API servers), and where Cilium runs, its policy denies the management
// API server by identity, whatever its address (see CiliumNetworkPolicy).
func (in Input) Outside(ports ...networkingv1.NetworkPolicyPort) networkingv1.NetworkPolicyEgressRule {
	if len(ports) == 0 {
		tcp := corev1.ProtocolTCP
		ports = []networkingv1.NetworkPolicyPort{{Protocol: &tcp}}
	}
	v4 := &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{linkLocalIPv4}}
	v6 := &networkingv1.IPBlock{CIDR: "::/0", Except: []string{linkLocalIPv6, awsMetadataV6}}
	for _, addr := range in.Settings.ManagementAPIServer {
		switch {
		case utilsnet.IsIPv4String(addr):
			v4.Except = append(v4.Except, addr+"/32")
		case utilsnet.IsIPv6String(addr):
			v6.Except = append(v6.Except, addr+"/128")
		}
	}
	return networkingv1.NetworkPolicyEgressRule{
		To:    []networkingv1.NetworkPolicyPeer{{IPBlock: v4}, {IPBlock: v6}},
		Ports: ports,
	}
}

// CiliumNetworkPolicyKind is Cilium's namespaced policy, cilium.io/v2.
var CiliumNetworkPolicyKind = schema.GroupVersionKind{Group: "cilium.io", Version: "v2", Kind: "CiliumNetworkPolicy"}

// CiliumNetworkPolicy denies component's pods, by Cilium's own identities,
// what a NetworkPolicy can only approximate by address: the management
// cluster's API server (the kube-apiserver entity, wherever it runs and
// whatever addresses it has, which Settings.ManagementAPIServer may not
// know all of) and the cloud metadata addresses. Cilium enforces the
// NetworkPolicy beside it too, which already denies by default both ways
// and admits the component's traffic; a deny rule wins over every allow, of
// that policy or any other a platform team adds. It holds deny rules only,
// so it cuts nothing else the NetworkPolicy admits, and it leaves out
// enableDefaultDeny, which Cilium before 1.15 does not know. It is
// unstructured so that the controller needs none of Cilium's code.
func (in Input) CiliumNetworkPolicy(component string) client.Object {
	meta := in.Meta(in.Name(component), component)
	labels := map[string]any{}
	for k, v := range in.Selector(component) {
		labels[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{},
		"spec": map[string]any{
			"endpointSelector": map[string]any{"matchLabels": labels},
			"egressDeny": []any{
				map[string]any{"toEntities": []any{"kube-apiserver"}},
				map[string]any{"toCIDR": []any{"169.254.169.254/32", "169.254.170.2/32", awsMetadataV6}},
			},
		},
	}}
	u.SetGroupVersionKind(CiliumNetworkPolicyKind)
	u.SetName(meta.Name)
	u.SetNamespace(meta.Namespace)
	u.SetLabels(meta.Labels)
	u.SetOwnerReferences(meta.OwnerReferences)
	return u
}
