package program

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/settings"
)

// Metrics is how a binary serves its metrics: by default over HTTPS (a
// certificate controller-runtime makes at start) to clients whose token the
// management cluster accepts (TokenReview) and who may GET the non-resource
// URL /metrics (SubjectAccessReview), as Cluster API's own providers do.
func Metrics(s settings.Serving) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: s.MetricsAddr}
	if s.MetricsSecure {
		opts.SecureServing = true
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return opts
}
