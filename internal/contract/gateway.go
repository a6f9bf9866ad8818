package contract

import (
	"fmt"
	"strings"

	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// GatewayListener is the Gateway listener a control plane is served through.
// The controller routes through it and the extension fills in the endpoint
// it gives before the control plane exists, so both pick it by one rule.
type GatewayListener struct {
	// Name of the listener, the TLSRoutes' sectionName.
	Name gatewayv1.SectionName
	// Domain is the listener's wildcard hostname without "*.".
	Domain string
	Port   int32
}

// FindGatewayListener picks the first listener of gw that passes TLS through
// on a wildcard hostname, the kind a hosted control plane needs.
func FindGatewayListener(gw *gatewayv1.Gateway) (GatewayListener, error) {
	for _, l := range gw.Spec.Listeners {
		if l.Protocol != gatewayv1.TLSProtocolType || l.TLS == nil || ptr.Deref(l.TLS.Mode, gatewayv1.TLSModeTerminate) != gatewayv1.TLSModePassthrough || l.Hostname == nil {
			continue
		}
		if domain, ok := strings.CutPrefix(string(*l.Hostname), "*."); ok && domain != "" {
			return GatewayListener{Name: l.Name, Domain: domain, Port: l.Port}, nil
		}
	}
	return GatewayListener{}, fmt.Errorf("the Gateway %s/%s has no listener with protocol TLS, tls.mode Passthrough and a wildcard hostname such as *.k8s.example.com",
		gw.Namespace, gw.Name)
}

// GatewayHost is where the API server of cluster in namespace is served
// through a listener on the wildcard domain: <cluster>.<namespace>.<domain>.
func GatewayHost(cluster, namespace, domain string) string {
	return cluster + "." + namespace + "." + domain
}

// Endpoint is where the API server of cluster in namespace is served through
// this listener: GatewayHost on the listener's port.
func (l GatewayListener) Endpoint(cluster, namespace string) clusterv1.APIEndpoint {
	return clusterv1.APIEndpoint{Host: GatewayHost(cluster, namespace, l.Domain), Port: l.Port}
}
