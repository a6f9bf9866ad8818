// Package telemetry exports OpenTelemetry traces over OTLP when an endpoint
// is configured: every request a binary makes to the Kubernetes API becomes
// a span, so a slow reconcile shows which calls it waited on. It also counts
// those requests by target, the management cluster or a workload cluster
// (hostedcp_api_requests_total).
package telemetry
