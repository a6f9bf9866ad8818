package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the tracer of this project's own spans.
const tracerName = "github.com/hostedcp/cluster-api-provider-hosted"

// The attributes of this project's spans. A span about one control plane
// carries its namespace and the names of its Cluster and control plane as
// far as they are known; none carries a value read from a Secret.
const (
	Namespace    = attribute.Key("k8s.namespace.name")
	Cluster      = attribute.Key("hostedcp.cluster")
	ControlPlane = attribute.Key("hostedcp.control_plane")
	// Side is management or workload: where a phase keeps its components.
	Side = attribute.Key("hostedcp.side")
	// Condition is the condition a phase owns; Reason is the reason it
	// recorded.
	Condition = attribute.Key("hostedcp.condition")
	Reason    = attribute.Key("hostedcp.reason")
	// Hook is the Runtime SDK hook an extension's span answers.
	Hook = attribute.Key("hostedcp.hook")
	// Kind, ObjectNamespace and ObjectName name the object of a workload
	// cluster request.
	Kind            = attribute.Key("k8s.kind")
	ObjectNamespace = attribute.Key("k8s.object.namespace")
	ObjectName      = attribute.Key("k8s.object.name")
)

// Start starts a span of ours below the one in ctx, if any. Until Setup, and
// without an endpoint, spans cost nothing and go nowhere.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return otel.Tracer(tracerName).Start(ctx, name, trace.WithAttributes(attrs...))
}

// End ends span, marked failed by err if it is not nil. Our errors never
// quote a Secret's value (see internal/netfail), so the message is kept.
func End(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
