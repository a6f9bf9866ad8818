package hooks

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// gateDecisions is hostedcp_upgrade_gate_decisions_total: the answers of
// the upgrade gates, by hook, decision and reason, each from a fixed set.
var gateDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "hostedcp_upgrade_gate_decisions_total",
	Help: "Answers of the upgrade gates, by hook, decision (allow, hold or refuse) and reason " +
		"(Healthy, NotHosted, ControlPlaneNotAvailable, EtcdUnhealthy, BadSetting).",
}, []string{"hook", "decision", "reason"})

// The decisions of a gate and their reasons. A control plane both not
// Available and with an unhealthy etcd is held for ControlPlaneNotAvailable.
const (
	allow  = "allow"
	hold   = "hold"
	refuse = "refuse"

	healthyReason      = "Healthy"
	notHostedReason    = "NotHosted"
	notAvailableReason = "ControlPlaneNotAvailable"
	etcdReason         = "EtcdUnhealthy"
	badSettingReason   = "BadSetting"
)

func init() {
	metrics.Registry.MustRegister(gateDecisions)
	// Every series exists from the start, at zero, for the dashboard.
	for _, hook := range []string{"BeforeClusterUpgrade", "BeforeControlPlaneUpgrade"} {
		for decision, reasons := range map[string][]string{
			allow: {healthyReason, notHostedReason}, hold: {notAvailableReason, etcdReason}, refuse: {badSettingReason},
		} {
			for _, reason := range reasons {
				gateDecisions.WithLabelValues(hook, decision, reason)
			}
		}
	}
}
