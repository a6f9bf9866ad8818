package etcd

import (
	"testing"

	"github.com/stretchr/testify/assert"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
)

// Only ready endpoints of the port named "client" are dialled.
func TestSliceEndpoints(t *testing.T) {
	slice := &discoveryv1.EndpointSlice{
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("metrics"), Port: ptr.To[int32](2381)},
			{Name: ptr.To("client"), Port: ptr.To[int32](2379)},
		},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.0.0.1"}}, // readiness unknown counts as ready
			{Addresses: []string{"10.0.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
		},
	}
	assert.Equal(t, []string{"10.0.0.2:2379", "10.0.0.1:2379"}, sliceEndpoints(slice))

	v6 := &discoveryv1.EndpointSlice{
		AddressType: discoveryv1.AddressTypeIPv6,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("client"), Port: ptr.To[int32](2379)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"fd00::1"}}},
	}
	assert.Equal(t, []string{"[fd00::1]:2379"}, sliceEndpoints(v6))

	slice.Ports = slice.Ports[:1]
	assert.Empty(t, sliceEndpoints(slice), "no port named client, nothing to dial")
	assert.Equal(t, []string{"a", "b"}, sortedUnique([]string{"b", "a", "b"}))
}

// New credentials, or the same bytes moved between fields, give a new key,
// so the cached clients are replaced.
func TestCredentialsKey(t *testing.T) {
	target := func(cert, key, ca string) Target {
		return Target{
			Cluster: types.NamespacedName{Namespace: "ns", Name: "c"}, ServerName: "c-etcd.ns.svc",
			Credentials: render.Credentials{Cert: []byte(cert), Key: []byte(key), CA: []byte(ca)},
		}
	}
	base := credentialsKey(target("cert", "key", "ca"))
	assert.Equal(t, base, credentialsKey(target("cert", "key", "ca")))
	assert.NotEqual(t, base, credentialsKey(target("cert2", "key", "ca")))
	assert.NotEqual(t, base, credentialsKey(target("cer", "tkey", "ca")))
	other := target("cert", "key", "ca")
	other.ServerName = "other"
	assert.NotEqual(t, base, credentialsKey(other))
}

func TestClientTLSRejectsBadCredentials(t *testing.T) {
	_, err := clientTLS(Target{Cluster: types.NamespacedName{Namespace: "ns", Name: "c"}, Credentials: render.Credentials{Cert: []byte("x"), Key: []byte("y")}})
	assert.ErrorContains(t, err, "etcd client certificate of ns/c")
	_, err = NewChecker().Check(t.Context(), Target{Cluster: types.NamespacedName{Namespace: "ns", Name: "c"}})
	assert.ErrorContains(t, err, "etcd client certificate of ns/c")
}
