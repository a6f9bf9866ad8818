package telemetry

import (
	"context"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// GRPC traces the calls of a gRPC client (an etcd client) as otelgrpc does.
func GRPC() grpc.DialOption { return grpc.WithStatsHandler(otelgrpc.NewClientHandler()) }

// WorkloadClient traces the requests c makes to a workload cluster's API
// server: a span per call named "workload <VERB>" with the object's kind,
// namespace and name. Cluster API's ClusterCache builds the HTTP transport
// of those clients itself, with no hook to wrap it, so they are traced at
// the client rather than as HTTP requests. Reads of a cached client (live
// false) are answered from its cache and make no span; its writes do.
func WorkloadClient(c client.Client, live bool) client.Client {
	return workloadClient{Client: c, live: live}
}

type workloadClient struct {
	client.Client
	live bool
}

func (c workloadClient) span(ctx context.Context, verb string, obj runtime.Object, do func(context.Context) error) error {
	var attrs []attribute.KeyValue
	if gvk, err := apiutil.GVKForObject(obj, c.Scheme()); err == nil {
		attrs = append(attrs, Kind.String(strings.TrimSuffix(gvk.Kind, "List")))
	}
	if o, ok := obj.(client.Object); ok {
		attrs = append(attrs, ObjectNamespace.String(o.GetNamespace()), ObjectName.String(o.GetName()))
	}
	return c.traced(ctx, verb, attrs, do)
}

func (c workloadClient) traced(ctx context.Context, verb string, attrs []attribute.KeyValue, do func(context.Context) error) error {
	ctx, s := Start(ctx, "workload "+verb, attrs...)
	err := do(ctx)
	End(s, err)
	return err
}

func (c workloadClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if !c.live {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	attrs := []attribute.KeyValue{ObjectNamespace.String(key.Namespace), ObjectName.String(key.Name)}
	if gvk, err := apiutil.GVKForObject(obj, c.Scheme()); err == nil {
		attrs = append(attrs, Kind.String(gvk.Kind))
	}
	return c.traced(ctx, "GET", attrs, func(ctx context.Context) error { return c.Client.Get(ctx, key, obj, opts...) })
}

func (c workloadClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if !c.live {
		return c.Client.List(ctx, list, opts...)
	}
	return c.span(ctx, "LIST", list, func(ctx context.Context) error { return c.Client.List(ctx, list, opts...) })
}

func (c workloadClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.span(ctx, "CREATE", obj, func(ctx context.Context) error { return c.Client.Create(ctx, obj, opts...) })
}

func (c workloadClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.span(ctx, "UPDATE", obj, func(ctx context.Context) error { return c.Client.Update(ctx, obj, opts...) })
}

func (c workloadClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.span(ctx, "PATCH", obj, func(ctx context.Context) error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

func (c workloadClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.span(ctx, "DELETE", obj, func(ctx context.Context) error { return c.Client.Delete(ctx, obj, opts...) })
}

// unstructuredApply is what client.ApplyConfigurationFromUnstructured
// returns, the apply configurations the controller applies.
type unstructuredApply interface {
	GetKind() string
	GetNamespace() string
	GetName() string
}

func (c workloadClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	var attrs []attribute.KeyValue
	if o, ok := obj.(unstructuredApply); ok {
		attrs = []attribute.KeyValue{Kind.String(o.GetKind()), ObjectNamespace.String(o.GetNamespace()), ObjectName.String(o.GetName())}
	}
	return c.traced(ctx, "APPLY", attrs, func(ctx context.Context) error { return c.Client.Apply(ctx, obj, opts...) })
}
