package components

import (
	"testing"

	"github.com/blang/semver/v4"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// The cluster DNS is the tenth address of the service network, as kubeadm
// has it, for IPv4 and IPv6 alike.
func TestDNSIP(t *testing.T) {
	for cidr, want := range map[string]string{
		"10.96.0.0/12":     "10.96.0.10",
		"172.30.128.0/17":  "172.30.128.10",
		"fd00:10:96::/108": "fd00:10:96::a",
	} {
		c := goldenCases[0]
		c.cluster = func(cl *clusterv1.Cluster) { cl.Spec.ClusterNetwork.Services.CIDRBlocks = []string{cidr} }
		in := c.input(t)
		assert.Equal(t, want, in.DNSIP(), cidr)
		dns := findObject[*corev1.Service](t, renderOf(t, CoreDNS{}, in), DNSServiceName)
		assert.Equal(t, want, dns.Spec.ClusterIP, cidr)
	}
}

// The add-ons follow the version the API servers run, not the one asked for:
// during an upgrade they stay until status.versions moves.
func TestAddonsFollowTheRunningVersion(t *testing.T) {
	in := goldenCases[0].input(t)
	in.ControlPlane.Status.Versions = []clusterv1.StatusVersion{{Version: "v1.35.2", Replicas: 2}}
	assert.Equal(t, "registry.k8s.io/kube-proxy:v1.35.2",
		findObject[*appsv1.DaemonSet](t, renderOf(t, KubeProxy{}, in), KubeProxyName).Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, "registry.k8s.io/coredns/coredns:v1.13.1",
		findObject[*appsv1.Deployment](t, renderOf(t, CoreDNS{}, in), CoreDNSName).Spec.Template.Spec.Containers[0].Image)
	assert.Contains(t, findObject[*corev1.ConfigMap](t, renderOf(t, Join{}, in), KubeadmConfigName).Data["ClusterConfiguration"], "kubernetesVersion: v1.35.2")
}

func TestCoreDNSTag(t *testing.T) {
	for version, want := range map[string]string{"1.30.0": "v1.11.3", "1.33.1": "v1.12.0", "1.36.3": "v1.14.2", "1.40.0": "v1.14.2"} {
		assert.Equal(t, want, coreDNSVersions.For(semver.MustParse(version)), version)
	}
}

// renderOf renders one component, which must not fail.
func renderOf(t *testing.T, c Component, in render.Input) []client.Object {
	t.Helper()
	objs, err := c.Render(in)
	require.NoError(t, err, c.Name())
	return objs
}

func findObject[T client.Object](t *testing.T, objs []client.Object, name string) T {
	t.Helper()
	for _, o := range objs {
		if typed, ok := o.(T); ok && o.GetName() == name {
			return typed
		}
	}
	var zero T
	t.Fatalf("no %T %s", zero, name)
	return zero
}

// The kubernetes Service's endpoint is the API server's address where it has
// one, the node-local tunnel in gateway mode and where the endpoint is a
// name, and nothing where no EndpointSlice can hold the endpoint.
func TestKubernetesServiceEndpoint(t *testing.T) {
	gateway := goldenCases[0].input(t)
	for host, want := range map[string]string{
		"192.0.2.10":      "192.0.2.10",
		"2001:db8::10":    "2001:db8::10",
		"api.example.com": contract.NodeLocalAddress,
		"127.0.0.1":       "",
		"169.254.10.1":    "",
		"0.0.0.0":         "",
		"fe80::1":         "",
	} {
		observed := gateway.Observed
		observed.Listener, observed.Endpoint = nil, clusterv1.APIEndpoint{Host: host, Port: 6443}
		objs := renderOf(t, KubernetesService{}, gateway.With(observed))
		if want == "" {
			assert.Empty(t, objs, host)
			continue
		}
		slice := findObject[*discoveryv1.EndpointSlice](t, objs, "kubernetes")
		assert.Equal(t, []string{want}, slice.Endpoints[0].Addresses, host)
		assert.Equal(t, int32(6443), *slice.Ports[0].Port, host)
		if want == contract.NodeLocalAddress {
			// A load balancer's name: the nodes forward to it as it is.
			args := findObject[*appsv1.DaemonSet](t, objs, KubernetesTunnelName).Spec.Template.Spec.Containers[0].Args
			assert.Contains(t, args, "--upstream=api.example.com:6443")
			assert.Contains(t, args, "--direct")
		}
	}

	observed := gateway.Observed
	observed.Listener = &contract.GatewayListener{Name: "tls", Domain: "k8s.example.com", Port: 8443}
	observed.Endpoint = observed.Listener.Endpoint(gateway.ClusterName(), gateway.Namespace())
	in := gateway.With(observed)
	objs := renderOf(t, KubernetesService{}, in)
	slice := findObject[*discoveryv1.EndpointSlice](t, objs, "kubernetes")
	assert.Equal(t, []string{contract.NodeLocalAddress}, slice.Endpoints[0].Addresses)
	assert.Equal(t, int32(contract.NodeTunnelPort), *slice.Ports[0].Port)
	tunnel := findObject[*appsv1.DaemonSet](t, objs, KubernetesTunnelName).Spec.Template.Spec
	assert.True(t, tunnel.HostNetwork)
	assert.Contains(t, tunnel.Containers[0].Args, "--upstream=kas-tunnel."+in.ClusterName()+"."+in.Namespace()+".k8s.example.com:8443")
	assert.Equal(t, []corev1.Capability{"NET_ADMIN"}, tunnel.Containers[0].SecurityContext.Capabilities.Add)
}

// KubernetesServiceReady says where the Service leads, by the EndpointSlice
// it keeps (read from nothing but what was applied).
func TestKubernetesServiceReadySaysWhereItLeads(t *testing.T) {
	in := goldenCases[0].input(t)
	observed := in.Observed
	observed.Listener, observed.Endpoint = nil, clusterv1.APIEndpoint{Host: "192.0.2.10", Port: 6443}
	objs := renderOf(t, KubernetesService{}, in.With(observed))
	out, err := KubernetesService{}.Ready(t.Context(), nil, in, readiness.Applied{Objects: objs})
	require.NoError(t, err)
	assert.True(t, out.Done)
	assert.Equal(t, "EndpointSlice default/kubernetes leads the kubernetes Service to 192.0.2.10:6443", out.Message)
}
