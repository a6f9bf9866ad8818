// Package telemetry exports OpenTelemetry traces over OTLP when an endpoint
// is configured and gives the binaries their spans: one per reconcile pass,
// phase, workload sync, etcd health check, snapshot and Runtime SDK hook
// call (Start, TraceHook), with the requests below them traced as the
// OpenTelemetry instrumentation libraries do (otelhttp for the management
// cluster's API server and, told nothing of where it goes, for S3 stores
// named by Secrets; otelgrpc for etcd), and a workload cluster's requests at
// the ClusterCache's clients (WorkloadClient). It also counts the requests
// to API servers by target, the management cluster or a workload cluster
// (hostedcp_api_requests_total).
package telemetry
