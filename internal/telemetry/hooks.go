package telemetry

import (
	"context"
	"reflect"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
)

// TraceHook traces a Runtime SDK handler: each call is a span "hook <Hook>",
// with the Cluster its request is about, whose status is the response's
// (a failure is an error with the response's message) and, for a hook that
// may ask Cluster API to wait, the seconds it asked for. Cluster API's
// server calls handlers by reflection, as they have one signature per hook;
// so is this one made.
func TraceHook(h server.ExtensionHandler) server.ExtensionHandler {
	fn := reflect.ValueOf(h.HandlerFunc)
	hook := runtimecatalog.HookName(h.Hook)
	h.HandlerFunc = reflect.MakeFunc(fn.Type(), func(args []reflect.Value) []reflect.Value {
		attrs := append([]attribute.KeyValue{Hook.String(hook)}, clusterOf(args[1].Interface())...)
		ctx, span := Start(args[0].Interface().(context.Context), "hook "+hook, attrs...)
		defer span.End()
		fn.Call([]reflect.Value{reflect.ValueOf(ctx), args[1], args[2]})
		if resp, ok := args[2].Interface().(runtimehooksv1.RetryResponseObject); ok && resp.GetRetryAfterSeconds() > 0 {
			span.SetAttributes(attribute.Int("hostedcp.retry_after_seconds", int(resp.GetRetryAfterSeconds())))
		}
		if resp, ok := args[2].Interface().(runtimehooksv1.ResponseObject); ok && resp.GetStatus() == runtimehooksv1.ResponseStatusFailure {
			span.SetStatus(codes.Error, resp.GetMessage())
		}
		return nil
	}).Interface()
	return h
}

// clusterOf is the namespace and name of the Cluster a hook's request is
// about: the lifecycle hooks name it; the topology hooks' items are held by
// it, or by its MachineDeployments and MachinePools, in its namespace.
func clusterOf(req any) []attribute.KeyValue {
	named := func(ns, name string) []attribute.KeyValue {
		return []attribute.KeyValue{Namespace.String(ns), Cluster.String(name)}
	}
	holders := func(refs []runtimehooksv1.HolderReference) []attribute.KeyValue {
		for _, ref := range refs {
			if ref.Kind == "Cluster" {
				return named(ref.Namespace, ref.Name)
			}
		}
		if len(refs) > 0 {
			return []attribute.KeyValue{Namespace.String(refs[0].Namespace)}
		}
		return nil
	}
	switch r := req.(type) {
	case *runtimehooksv1.BeforeClusterCreateRequest:
		return named(r.Cluster.Namespace, r.Cluster.Name)
	case *runtimehooksv1.AfterControlPlaneInitializedRequest:
		return named(r.Cluster.Namespace, r.Cluster.Name)
	case *runtimehooksv1.BeforeClusterUpgradeRequest:
		return named(r.Cluster.Namespace, r.Cluster.Name)
	case *runtimehooksv1.BeforeControlPlaneUpgradeRequest:
		return named(r.Cluster.Namespace, r.Cluster.Name)
	case *runtimehooksv1.AfterControlPlaneUpgradeRequest:
		return named(r.Cluster.Namespace, r.Cluster.Name)
	case *runtimehooksv1.BeforeClusterDeleteRequest:
		return named(r.Cluster.Namespace, r.Cluster.Name)
	case *runtimehooksv1.GeneratePatchesRequest:
		refs := make([]runtimehooksv1.HolderReference, 0, len(r.Items))
		for _, item := range r.Items {
			refs = append(refs, item.HolderReference)
		}
		return holders(refs)
	case *runtimehooksv1.ValidateTopologyRequest:
		refs := make([]runtimehooksv1.HolderReference, 0, len(r.Items))
		for _, item := range r.Items {
			refs = append(refs, item.HolderReference)
		}
		return holders(refs)
	}
	return nil
}
