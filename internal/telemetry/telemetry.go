package telemetry

import (
	"context"
	"fmt"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"k8s.io/client-go/rest"
)

// Setup starts exporting traces of service to the OTLP gRPC endpoint (a URL
// such as http://otel-collector:4317) and traces every request made with cfg.
// With an empty endpoint it does nothing. The returned function flushes and
// stops the exporter.
//
// The rest of the exporter's and the SDK's configuration is theirs, read
// from the standard variables: the sampler (OTEL_TRACES_SAMPLER,
// OTEL_TRACES_SAMPLER_ARG; parent-based always-on by default), headers,
// certificates, compression and timeout (OTEL_EXPORTER_OTLP_*), and the
// resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES).
func Setup(ctx context.Context, endpoint, service string, cfg *rest.Config) (func(context.Context) error, error) {
	if endpoint == "" {
		return func(context.Context) error { return nil }, nil
	}
	// The endpoint is given explicitly: the settings have already chosen
	// between OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT
	// and the flags, and "none" is ours, not the SDK's.
	exporter, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter for %s: %w", endpoint, err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(service)), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return otelhttp.NewTransport(rt, otelhttp.WithTracerProvider(provider))
	})
	return provider.Shutdown, nil
}
