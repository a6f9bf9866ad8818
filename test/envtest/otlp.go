package envtest

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// OTLPReceiver is an OTLP/gRPC trace receiver in the test process, serving
// OpenTelemetry's own trace service as a collector does, and keeping the
// spans it receives in memory.
type OTLPReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	// Endpoint is the URL exporters send to (OTEL_EXPORTER_OTLP_ENDPOINT).
	Endpoint string
	server   *grpc.Server
	mu       sync.Mutex
	spans    []Span
}

// Span is a span as received.
type Span struct {
	TraceID, SpanID, ParentID string
	Name                      string
	// Service is the service.name of the resource that sent it.
	Service    string
	Attributes map[string]string
	// Failed tells the span's status is an error; Message is its
	// description.
	Failed  bool
	Message string
	// StartNano orders spans of one trace.
	StartNano uint64
}

// StartOTLPReceiver serves the receiver on a free port of 127.0.0.1.
func StartOTLPReceiver() (*OTLPReceiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("OTLP receiver: %w", err)
	}
	r := &OTLPReceiver{Endpoint: "http://" + l.Addr().String(), server: grpc.NewServer()}
	coltracepb.RegisterTraceServiceServer(r.server, r)
	go func() { _ = r.server.Serve(l) }()
	return r, nil
}

// Stop stops serving.
func (r *OTLPReceiver) Stop() { r.server.Stop() }

// Export keeps the spans of a request.
func (r *OTLPReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := attributes(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Service: service,
					Attributes: attributes(s.GetAttributes()), StartNano: s.GetStartTimeUnixNano(),
					Failed: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR, Message: s.GetStatus().GetMessage(),
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Spans are the spans received so far.
func (r *OTLPReceiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// attributes are key-values as text.
func attributes(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = strconv.FormatBool(v.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
		default:
			m[kv.GetKey()] = kv.GetValue().String()
		}
	}
	return m
}
