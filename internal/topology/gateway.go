package topology

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// GatewayError is a Gateway that cannot serve a control plane: it is missing
// or has no suitable listener. The user fixes the Gateway or the reference;
// failures to read it are other errors.
type GatewayError struct{ Reason string }

func (e *GatewayError) Error() string { return e.Reason }

// ResolveGateway reads the Gateway and picks its listener by the rule the
// controller uses (contract.FindGatewayListener), so the endpoint the
// extension fills in is the one the controller serves.
func ResolveGateway(ctx context.Context, r client.Reader, name types.NamespacedName) (contract.GatewayListener, error) {
	gw := &gatewayv1.Gateway{}
	if err := r.Get(ctx, name, gw); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return contract.GatewayListener{}, &GatewayError{fmt.Sprintf("no Gateway %s exists", name)}
		case meta.IsNoMatchError(err):
			return contract.GatewayListener{}, &GatewayError{fmt.Sprintf("no Gateway %s can exist: the Gateway API is not installed in the management cluster", name)}
		}
		return contract.GatewayListener{}, fmt.Errorf("read Gateway %s: %w", name, err)
	}
	l, err := contract.FindGatewayListener(gw)
	if err != nil {
		return contract.GatewayListener{}, &GatewayError{err.Error()}
	}
	return l, nil
}
