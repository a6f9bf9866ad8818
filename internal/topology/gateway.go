package topology

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
)

// GatewayError is a Gateway that cannot serve a control plane: it is missing
// or has no suitable listener. The user fixes the Gateway or the reference;
// failures to read it are other errors.
type GatewayError struct{ Reason string }

func (e *GatewayError) Error() string { return e.Reason }

// Listener is the part of a Gateway that serves hosted API servers: a TLS
// passthrough listener on a wildcard hostname.
type Listener struct {
	// Domain is the listener's hostname without its "*." prefix.
	Domain string
	Port   int32
}

// Endpoint is where the API server of a cluster is served through this
// listener: <cluster>.<namespace>.<domain> on the listener's port.
func (l Listener) Endpoint(cluster, namespace string) clusterv1.APIEndpoint {
	return clusterv1.APIEndpoint{Host: components.GatewayHost(cluster, namespace, l.Domain), Port: l.Port}
}

// ResolveGateway reads the Gateway and picks its first listener with
// protocol TLS, tls.mode Passthrough and a wildcard hostname.
func ResolveGateway(ctx context.Context, r client.Reader, name types.NamespacedName) (Listener, error) {
	gw := &gatewayv1.Gateway{}
	if err := r.Get(ctx, name, gw); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return Listener{}, &GatewayError{fmt.Sprintf("no Gateway %s exists", name)}
		case meta.IsNoMatchError(err):
			return Listener{}, &GatewayError{fmt.Sprintf("no Gateway %s can exist: the Gateway API is not installed in the management cluster", name)}
		}
		return Listener{}, fmt.Errorf("read Gateway %s: %w", name, err)
	}
	l, err := components.FindGatewayListener(gw)
	if err != nil {
		return Listener{}, &GatewayError{err.Error()}
	}
	return Listener{Domain: l.Domain, Port: l.Port}, nil
}
