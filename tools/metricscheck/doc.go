// Command metricscheck proves that a Grafana dashboard and a PrometheusRule
// read only metrics that exist: it scrapes running binaries as Prometheus
// would (HTTPS with a bearer token), keeps the samples in memory,
// and evaluates every query of the dashboard and every rule with
// Prometheus's own PromQL engine. A query fails when it does not parse, when
// its evaluation fails, or when one of its series selectors matches no
// series at all: a panel or alert on a metric, or a label value, that is not
// there. It lives in a module of its own so that Prometheus's dependencies
// stay out of the provider's.
//
//	metricscheck -token-file F -rules R -dashboard D [-interval 5s] URL...
package main
