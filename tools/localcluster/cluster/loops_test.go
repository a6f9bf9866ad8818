package cluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
