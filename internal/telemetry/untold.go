package telemetry

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Untold traces the requests made through rt to an endpoint a Secret names
// (an S3 store): a span per request, as otelhttp makes it, keeping only the
// attributes that say nothing of where it went (method, status code, sizes,
// error type) and no error message, which would quote the URL. Nothing of
// the trace is sent to the endpoint.
func Untold(rt http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(rt,
		otelhttp.WithTracerProvider(untoldProvider{otel.GetTracerProvider()}),
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()))
}

// told are the attributes of an HTTP client span that Untold keeps.
var told = map[attribute.Key]bool{
	"http.request.method": true, "http.request.method_original": true, "http.response.status_code": true,
	"http.request.resend_count": true, "http.request.body.size": true, "http.response.body.size": true,
	"error.type": true, "network.protocol.name": true, "network.protocol.version": true,
}

func keepTold(attrs []attribute.KeyValue) []attribute.KeyValue {
	kept := attrs[:0:0]
	for _, a := range attrs {
		if told[a.Key] {
			kept = append(kept, a)
		}
	}
	return kept
}

type untoldProvider struct{ trace.TracerProvider }

func (p untoldProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return untoldTracer{p.TracerProvider.Tracer(name, opts...)}
}

type untoldTracer struct{ trace.Tracer }

func (t untoldTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	kept := []trace.SpanStartOption{
		trace.WithSpanKind(cfg.SpanKind()), trace.WithAttributes(keepTold(cfg.Attributes())...), trace.WithLinks(cfg.Links()...),
	}
	if !cfg.Timestamp().IsZero() {
		kept = append(kept, trace.WithTimestamp(cfg.Timestamp()))
	}
	if cfg.NewRoot() {
		kept = append(kept, trace.WithNewRoot())
	}
	ctx, span := t.Tracer.Start(ctx, name, kept...)
	untold := untoldSpan{span}
	return trace.ContextWithSpan(ctx, untold), untold
}

type untoldSpan struct{ trace.Span }

func (s untoldSpan) SetAttributes(attrs ...attribute.KeyValue) {
	s.Span.SetAttributes(keepTold(attrs)...)
}

func (s untoldSpan) SetStatus(code codes.Code, _ string) { s.Span.SetStatus(code, "") }

func (s untoldSpan) RecordError(_ error, opts ...trace.EventOption) {
	s.Span.RecordError(errors.New("request failed"), opts...)
}
