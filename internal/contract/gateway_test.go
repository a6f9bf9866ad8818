package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The first TLS passthrough listener on a wildcard hostname serves the
// control plane; the controller and the extension both rely on this pick.
func TestFindGatewayListener(t *testing.T) {
	passthrough := gatewayv1.TLSModePassthrough
	terminate := gatewayv1.TLSModeTerminate
	host := func(h string) *gatewayv1.Hostname { v := gatewayv1.Hostname(h); return &v }
	gw := &gatewayv1.Gateway{Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{
		{Name: "https", Protocol: gatewayv1.HTTPSProtocolType, Port: 443, Hostname: host("*.a.example.com")},
		{Name: "terminate", Protocol: gatewayv1.TLSProtocolType, Port: 443, Hostname: host("*.b.example.com"), TLS: &gatewayv1.ListenerTLSConfig{Mode: &terminate}},
		{Name: "exact", Protocol: gatewayv1.TLSProtocolType, Port: 443, Hostname: host("api.example.com"), TLS: &gatewayv1.ListenerTLSConfig{Mode: &passthrough}},
		{Name: "tls", Protocol: gatewayv1.TLSProtocolType, Port: 8443, Hostname: host("*.k8s.example.com"), TLS: &gatewayv1.ListenerTLSConfig{Mode: &passthrough}},
	}}}
	l, err := FindGatewayListener(gw)
	require.NoError(t, err)
	assert.Equal(t, GatewayListener{Name: "tls", Domain: "k8s.example.com", Port: 8443}, l)
	assert.Equal(t, clusterv1.APIEndpoint{Host: "demo.default.k8s.example.com", Port: 8443}, l.Endpoint("demo", "default"))

	gw.Spec.Listeners = gw.Spec.Listeners[:3]
	_, err = FindGatewayListener(gw)
	assert.ErrorContains(t, err, "no listener with protocol TLS, tls.mode Passthrough and a wildcard hostname")
}
