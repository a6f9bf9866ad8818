package telemetry

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
)

// recording makes the global tracer provider record spans for the test.
func recording(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	before := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(before) })
	return rec
}

// A request to an endpoint a Secret names is a span below the caller's
// that says its method and status, and neither the address, the bucket nor
// the query; the endpoint is sent nothing of the trace. A request that gets
// no answer fails the span without the error's words, which quote the URL.
func TestUntoldSaysNothingOfTheEndpoint(t *testing.T) {
	rec := recording(t)
	var headers http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { headers = r.Header }))
	defer srv.Close()
	c := &http.Client{Transport: Untold(http.DefaultTransport)}
	ctx, parent := Start(context.Background(), "etcd snapshot")
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/tenant-bucket/folder/key?X-Amz-Credential=AKIDEXAMPLE", strings.NewReader("x"))
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + l.Addr().String() + "/tenant-bucket/key"
	require.NoError(t, l.Close())
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, closed, nil)
	require.NoError(t, err)
	_, err = c.Do(req) //nolint:bodyclose // no response
	require.Error(t, err)
	parent.End()

	assert.Empty(t, headers.Get("Traceparent"), "no trace context sent")
	spans := rec.Ended()
	require.Len(t, spans, 3)
	for _, s := range spans[:2] {
		assert.Equal(t, parent.SpanContext().SpanID(), s.Parent().SpanID(), s.Name())
		for _, a := range s.Attributes() {
			v := a.Value.String()
			for _, told := range []string{"127.0.0.1", "tenant-bucket", "AKIDEXAMPLE"} {
				assert.NotContains(t, v, told, "attribute %s", a.Key)
			}
		}
	}
	assert.Equal(t, "HTTP PUT", spans[0].Name())
	assert.Contains(t, spans[0].Attributes(), attribute.Int("http.response.status_code", 200))
	assert.Equal(t, codes.Error, spans[1].Status().Code)
	assert.Empty(t, spans[1].Status().Description)
	for _, e := range spans[1].Events() {
		for _, a := range e.Attributes {
			assert.NotContains(t, a.Value.String(), "127.0.0.1")
		}
	}
}

// A hook's call is a span below the context the handler gets, with the
// Cluster it is about, the seconds it asks Cluster API to wait and, for a
// failure, the response's message.
func TestTraceHook(t *testing.T) {
	rec := recording(t)
	var inside trace.SpanContext
	h := TraceHook(server.ExtensionHandler{
		Hook: runtimehooksv1.BeforeClusterUpgrade, Name: "before-cluster-upgrade",
		HandlerFunc: func(ctx context.Context, _ *runtimehooksv1.BeforeClusterUpgradeRequest, resp *runtimehooksv1.BeforeClusterUpgradeResponse) {
			inside = trace.SpanContextFromContext(ctx)
			resp.Status, resp.RetryAfterSeconds, resp.Message = runtimehooksv1.ResponseStatusSuccess, 10, "etcd is not healthy"
		},
	})
	call := h.HandlerFunc.(func(context.Context, *runtimehooksv1.BeforeClusterUpgradeRequest, *runtimehooksv1.BeforeClusterUpgradeResponse))
	call(context.Background(), &runtimehooksv1.BeforeClusterUpgradeRequest{
		Cluster: clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "c1"}},
	}, &runtimehooksv1.BeforeClusterUpgradeResponse{})

	patches := TraceHook(server.ExtensionHandler{
		Hook: runtimehooksv1.GeneratePatches, Name: "generate-patches",
		HandlerFunc: func(_ context.Context, _ *runtimehooksv1.GeneratePatchesRequest, resp *runtimehooksv1.GeneratePatchesResponse) {
			resp.Status, resp.Message = runtimehooksv1.ResponseStatusFailure, "gatewayName: no such Gateway"
		},
	}).HandlerFunc.(func(context.Context, *runtimehooksv1.GeneratePatchesRequest, *runtimehooksv1.GeneratePatchesResponse))
	patches(context.Background(), &runtimehooksv1.GeneratePatchesRequest{Items: []runtimehooksv1.GeneratePatchesRequestItem{
		{HolderReference: runtimehooksv1.HolderReference{Kind: "MachineDeployment", Namespace: "tenant", Name: "md"}},
		{HolderReference: runtimehooksv1.HolderReference{Kind: "Cluster", Namespace: "tenant", Name: "c2"}},
	}}, &runtimehooksv1.GeneratePatchesResponse{})

	spans := rec.Ended()
	require.Len(t, spans, 2)
	upgrade := spans[0]
	assert.Equal(t, "hook BeforeClusterUpgrade", upgrade.Name())
	assert.Equal(t, upgrade.SpanContext().SpanID(), inside.SpanID(), "the handler runs inside the span")
	assert.Subset(t, upgrade.Attributes(), []attribute.KeyValue{
		Hook.String("BeforeClusterUpgrade"), Namespace.String("tenant"), Cluster.String("c1"), attribute.Int("hostedcp.retry_after_seconds", 10),
	})
	assert.Equal(t, codes.Unset, upgrade.Status().Code, "asking to wait is no failure")
	generate := spans[1]
	assert.Equal(t, "hook GeneratePatches", generate.Name())
	assert.Subset(t, generate.Attributes(), []attribute.KeyValue{Namespace.String("tenant"), Cluster.String("c2")})
	assert.Equal(t, sdktrace.Status{Code: codes.Error, Description: "gatewayName: no such Gateway"}, generate.Status())
}
