package hooks

import (
	"k8s.io/utils/ptr"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
)

// Handler names, as they appear in an ExtensionConfig's status.
const (
	BeforeClusterCreateHandler          = "before-cluster-create"
	AfterControlPlaneInitializedHandler = "after-control-plane-initialized"
	BeforeClusterUpgradeHandler         = "before-cluster-upgrade"
	BeforeControlPlaneUpgradeHandler    = "before-control-plane-upgrade"
	AfterControlPlaneUpgradeHandler     = "after-control-plane-upgrade"
	BeforeClusterDeleteHandler          = "before-cluster-delete"
)

// ExtensionHandlers are the lifecycle hooks for the extension server. The
// upgrade gates fail closed: an upgrade waits while the extension cannot be
// reached. The others only record or release, and fail open.
func (h *Handlers) ExtensionHandlers() []server.ExtensionHandler {
	return []server.ExtensionHandler{
		handler(runtimehooksv1.BeforeClusterCreate, BeforeClusterCreateHandler, h.BeforeClusterCreate, runtimehooksv1.FailurePolicyIgnore),
		handler(runtimehooksv1.AfterControlPlaneInitialized, AfterControlPlaneInitializedHandler, h.AfterControlPlaneInitialized, runtimehooksv1.FailurePolicyIgnore),
		handler(runtimehooksv1.BeforeClusterUpgrade, BeforeClusterUpgradeHandler, h.BeforeClusterUpgrade, runtimehooksv1.FailurePolicyFail),
		handler(runtimehooksv1.BeforeControlPlaneUpgrade, BeforeControlPlaneUpgradeHandler, h.BeforeControlPlaneUpgrade, runtimehooksv1.FailurePolicyFail),
		handler(runtimehooksv1.AfterControlPlaneUpgrade, AfterControlPlaneUpgradeHandler, h.AfterControlPlaneUpgrade, runtimehooksv1.FailurePolicyIgnore),
		handler(runtimehooksv1.BeforeClusterDelete, BeforeClusterDeleteHandler, h.BeforeClusterDelete, runtimehooksv1.FailurePolicyIgnore),
	}
}

// timeoutSeconds leaves room for a gate's whole check (gateTimeout).
const timeoutSeconds = 10

func handler(hook any, name string, fn any, policy runtimehooksv1.FailurePolicy) server.ExtensionHandler {
	return server.ExtensionHandler{
		Hook:           hook,
		Name:           name,
		HandlerFunc:    fn,
		TimeoutSeconds: ptr.To[int32](timeoutSeconds),
		FailurePolicy:  ptr.To(policy),
	}
}
