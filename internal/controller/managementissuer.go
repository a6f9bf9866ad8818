package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/netfail"
)

// +kubebuilder:rbac:urls=/.well-known/openid-configuration;/openid/v1/jwks,verbs=get

// IssuerSource tells the management cluster's service account issuer and
// its public keys.
type IssuerSource interface {
	ManagementIssuer(ctx context.Context) (*render.ManagementIssuer, error)
}

// issuerRefresh is how long what the management cluster's API server said
// of its issuer is used for every control plane before it is asked again:
// a key it adds reaches the hosted API servers within a pass after it.
const issuerRefresh = time.Minute

// managementIssuer asks the management cluster's API server, with the
// controller's credentials, for its issuer discovery document and keys,
// at most once per issuerRefresh whatever the number of control planes.
type managementIssuer struct {
	client rest.Interface

	mu      sync.Mutex
	last    *render.ManagementIssuer
	fetched time.Time
}

// NewIssuerSource reads the issuer of the API server client talks to.
func NewIssuerSource(client rest.Interface) IssuerSource {
	return &managementIssuer{client: client}
}

// ManagementIssuer is what was read last, read again once it is older than
// issuerRefresh. What was read before stays in use while the API server
// cannot be read again: a passing failure must not take the authenticator
// from the hosted API servers.
func (m *managementIssuer) ManagementIssuer(ctx context.Context) (*render.ManagementIssuer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last != nil && time.Since(m.fetched) < issuerRefresh {
		return m.last, nil
	}
	issuer, err := m.read(ctx)
	if err != nil {
		if m.last != nil {
			return m.last, nil
		}
		return nil, err
	}
	m.last, m.fetched = issuer, time.Now()
	return issuer, nil
}

func (m *managementIssuer) read(ctx context.Context) (*render.ManagementIssuer, error) {
	discovery, err := m.client.Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil {
		return nil, readFailed("its issuer discovery document", err)
	}
	var doc struct {
		Issuer     string   `json:"issuer"`
		Algorithms []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := json.Unmarshal(discovery, &doc); err != nil || doc.Issuer == "" {
		return nil, errors.New("the management cluster's issuer discovery document names no issuer")
	}
	keys, err := m.client.Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
	if err != nil {
		return nil, readFailed("its service account keys", err)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(keys, &set); err != nil || len(set.Keys) == 0 {
		return nil, errors.New("the management cluster's API server serves no service account keys at /openid/v1/jwks")
	}
	return &render.ManagementIssuer{URL: doc.Issuer, Algorithms: doc.Algorithms, Keys: keys}, nil
}

// readFailed tells why what of the management cluster's API server could
// not be read: a network failure without its address, which a tenant's
// condition has no business showing; the API server's answer as it is
// (a refusal names the controller's own service account).
func readFailed(what string, err error) error {
	if why := netfail.Describe(err); why != "" {
		return fmt.Errorf("cannot read %s from the management cluster's API server: %s", what, why)
	}
	return fmt.Errorf("cannot read %s from the management cluster's API server: %w", what, err)
}

// observeManagementIssuer reads the management cluster's issuer for a
// control plane that accepts its service accounts. While it cannot be read,
// or cannot serve, the API servers keep running as they are, and the
// authentication configuration leaves the authenticator out.
func (r *Reconciler) observeManagementIssuer(ctx context.Context, cp *v1alpha1.HostedControlPlane, in render.Input, o *render.Observed) (readiness.Outcome, bool) {
	if cp.Spec.ManagementServiceAccounts == nil {
		return readiness.Outcome{}, false
	}
	issuer, err := r.issuers.ManagementIssuer(ctx)
	if err != nil {
		return readiness.Problem(v1alpha1.ManagementIssuerUnusableReason, "spec.managementServiceAccounts: %v", err), true
	}
	o.ManagementIssuer = issuer
	if err := components.CheckManagementIssuer(in.With(*o)); err != nil {
		// Rendered, it would keep restarted API servers from starting.
		o.ManagementIssuer = nil
		return readiness.Problem(v1alpha1.ManagementIssuerUnusableReason, "spec.managementServiceAccounts: %v", err), true
	}
	return readiness.Outcome{}, false
}
