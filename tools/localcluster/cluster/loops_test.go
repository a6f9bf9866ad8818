package cluster

import (
	"context"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A Service that asks for an address gets it, and no other Service gets
// it even before it is given; the others get the lowest free ones; a
// request outside the pool or for a given address is refused without
// holding up the rest.
func TestAllocateAddresses(t *testing.T) {
	lb := func(name, asks string, has ...string) *corev1.Service {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
		}
		if asks != "" {
			svc.Annotations = map[string]string{LoadBalancerIPAnnotation: asks}
		}
		for _, ip := range has {
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		return svc
	}
	objs := []client.Object{
		lb("has", "", "10.250.0.1"),
		lb("dynamic-1", ""),
		lb("asks-2", "10.250.0.2"),
		lb("dynamic-2", ""),
		lb("outside", "10.1.0.1"),
		lb("asks-given", "10.250.0.1"),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cluster-ip"}},
	}
	c := &Cluster{Client: fake.NewClientBuilder().WithObjects(objs...).WithStatusSubresource(objs...).Build()}
	err := c.allocateAddresses(context.Background())
	require.Error(t, err)
	assert.ErrorContains(t, err, `service ns/outside asks for "10.1.0.1", not an address of 10.250.0.0/24`)
	assert.ErrorContains(t, err, "service ns/asks-given asks for 10.250.0.1, which another Service has")

	want := map[string]string{
		"has": "10.250.0.1", "asks-2": "10.250.0.2", "dynamic-1": "10.250.0.3", "dynamic-2": "10.250.0.4",
		"outside": "", "asks-given": "", "cluster-ip": "",
	}
	for name, ip := range want {
		svc := &corev1.Service{}
		require.NoError(t, c.Client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, svc))
		got := ""
		if in := svc.Status.LoadBalancer.Ingress; len(in) > 0 {
			got = in[0].IP
		}
		assert.Equal(t, ip, got, "address of %s", name)
	}
}

// In a Namespace with LoadBalancerHostnamesLabel, a LoadBalancer Service
// gets a Service beside it with its selector and ports, which gets an
// address, and then reports that address's name, which the DNS's
// expression turns back into the address; a Service elsewhere gets an
// address as before.
func TestLoadBalancerHostnames(t *testing.T) {
	ports := []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 6443, TargetPort: intstr.FromInt32(6443), NodePort: 30443}}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "aws", Labels: map[string]string{LoadBalancerHostnamesLabel: "true"}}},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "aws", Name: "api", UID: "uid-api"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "api"}, Ports: ports},
		},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "api"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports},
		},
	}
	c := &Cluster{Client: fake.NewClientBuilder().WithObjects(objs...).WithStatusSubresource(&corev1.Service{}).Build()}
	ctx := context.Background()
	require.NoError(t, c.allocateAddresses(ctx))
	require.NoError(t, c.allocateAddresses(ctx))

	lb := &corev1.Service{}
	require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Namespace: "aws", Name: "api-lb"}, lb))
	assert.Equal(t, map[string]string{"app": "api"}, lb.Spec.Selector)
	assert.Equal(t, []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 6443, TargetPort: intstr.FromInt32(6443)}}, lb.Spec.Ports)
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "api", UID: "uid-api"}}, lb.OwnerReferences)
	require.Len(t, lb.Status.LoadBalancer.Ingress, 1)
	address := lb.Status.LoadBalancer.Ingress[0].IP

	svc := &corev1.Service{}
	require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Namespace: "aws", Name: "api"}, svc))
	require.Equal(t, []corev1.LoadBalancerIngress{{Hostname: LoadBalancerHostname(netip.MustParseAddr(address))}}, svc.Status.LoadBalancer.Ingress,
		"a hostname and no address")
	groups := regexp.MustCompile(loadBalancerMatch).FindStringSubmatch(svc.Status.LoadBalancer.Ingress[0].Hostname + ".")
	require.Len(t, groups, 5, "the DNS answers for %s", svc.Status.LoadBalancer.Ingress[0].Hostname)
	assert.Equal(t, address, strings.Join(groups[1:], "."))

	require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Namespace: "elsewhere", Name: "api"}, svc))
	require.Len(t, svc.Status.LoadBalancer.Ingress, 1)
	assert.NotEmpty(t, svc.Status.LoadBalancer.Ingress[0].IP)
	assert.NotEqual(t, address, svc.Status.LoadBalancer.Ingress[0].IP)
}
