package topology

import (
	"k8s.io/utils/ptr"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
)

// Handler names. A ClusterClass refers to them as <name>.<ExtensionConfig
// name> in an external patch.
const (
	DiscoverVariablesHandler = "discover-variables"
	GeneratePatchesHandler   = "generate-patches"
	ValidateTopologyHandler  = "validate-topology"
)

// timeoutSeconds bounds each call; the hooks only read a Gateway from the
// manager's cache.
const timeoutSeconds = 10

// ExtensionHandlers are the topology mutation hooks for the extension
// server. They fail closed: Cluster API supports nothing else for them.
func (h *Handlers) ExtensionHandlers() []server.ExtensionHandler {
	return []server.ExtensionHandler{
		handler(runtimehooksv1.DiscoverVariables, DiscoverVariablesHandler, h.DiscoverVariables),
		handler(runtimehooksv1.GeneratePatches, GeneratePatchesHandler, h.GeneratePatches),
		handler(runtimehooksv1.ValidateTopology, ValidateTopologyHandler, h.ValidateTopology),
	}
}

func handler(hook any, name string, fn any) server.ExtensionHandler {
	return server.ExtensionHandler{
		Hook:           hook,
		Name:           name,
		HandlerFunc:    fn,
		TimeoutSeconds: ptr.To[int32](timeoutSeconds),
		FailurePolicy:  ptr.To(runtimehooksv1.FailurePolicyFail),
	}
}
