package telemetry

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// apiRequests is hostedcp_api_requests_total. client-go reports each
// request's host; a workload cluster's host is one per cluster, so it is
// told apart from the management cluster's here and not kept.
var apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "hostedcp_api_requests_total",
	Help: "Requests to Kubernetes API servers, by target (management, or workload for any workload cluster's), method and status code.",
}, []string{"target", "method", "code"})

// The targets of hostedcp_api_requests_total.
const (
	Management = "management"
	Workload   = "workload"
)

func init() { metrics.Registry.MustRegister(apiRequests) }

// CountRequests counts every request client-go makes in this process in
// hostedcp_api_requests_total: those to the API server of management as
// target management, all others as workload. controller-runtime's own
// rest_client_requests_total goes on counting them by host. Call it once,
// before any client is made.
func CountRequests(management *rest.Config) error {
	u, _, err := rest.DefaultServerUrlFor(management)
	if err != nil {
		return err
	}
	clientmetrics.RequestResult = targetCounter{next: clientmetrics.RequestResult, management: u.Host}
	return nil
}

type targetCounter struct {
	next       clientmetrics.ResultMetric
	management string
}

func (c targetCounter) Increment(ctx context.Context, code, method, host string) {
	target := Workload
	if host == c.management {
		target = Management
	}
	apiRequests.WithLabelValues(target, method, code).Inc()
	c.next.Increment(ctx, code, method, host)
}
