package controller

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// The control plane reconciler's metrics, served with controller-runtime's
// own. Every label takes its values from a fixed set (sides, phases, which
// are conditions, reasons, actions), except namespace and name, which name a
// control plane and go when it does; the README lists them.
var (
	phaseSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hostedcp_phase_duration_seconds",
		Help:    "Time one pass spent keeping one phase of a control plane, by side (management or workload) and phase (the condition it owns).",
		Buckets: prometheus.ExponentialBuckets(0.002, 4, 9),
	}, []string{"side", "phase"})
	availableSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hostedcp_control_plane_available_seconds",
		Help:    "Seconds from the creation of a control plane to the first answer of its API server (Available first true).",
		Buckets: []float64{30, 60, 120, 180, 300, 450, 600, 900, 1200, 1800, 3600},
	})
	repairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostedcp_addon_repairs_total",
		Help: "Objects the controller keeps in workload clusters that it found edited (action restored) or deleted (recreated) and repaired, by phase.",
	}, []string{"phase", "action"})
	fleet = newFleetCollector()
)

// The sides of a pass (phaseSeconds) and the repairs of an object (repairs).
const (
	managementSide = "management"
	workloadSide   = "workload"
	restored       = "restored"
	recreated      = "recreated"
)

func init() {
	metrics.Registry.MustRegister(phaseSeconds, availableSeconds, repairs, fleet)
	// Every series a dashboard or alert reads exists from the start, at zero.
	for _, p := range managementPhases(etcd.Component{}) {
		phaseSeconds.WithLabelValues(managementSide, p.condition)
	}
	for _, p := range workloadPhases() {
		phaseSeconds.WithLabelValues(workloadSide, p.condition)
		repairs.WithLabelValues(p.condition, restored)
		repairs.WithLabelValues(p.condition, recreated)
	}
}

// observePass records in the metrics what a pass wrote into the status.
// wasInitialized is whether the control plane had answered before it.
func observePass(s *scope, wasInitialized bool) {
	hcp := s.hcp
	key := types.NamespacedName{Namespace: hcp.Namespace, Name: hcp.Name}
	if !hcp.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(hcp, Finalizer) {
		fleet.forget(key) // the pass let it go
		return
	}
	if !wasInitialized && ptr.Deref(hcp.Status.Initialization.ControlPlaneInitialized, false) {
		availableSeconds.Observe(time.Since(hcp.CreationTimestamp.Time).Seconds())
	}
	f := factsOf(s)
	if s.etcdAsking {
		// etcd's answer is not in yet: what the last one said stands, as
		// in the status.
		was := fleet.get(key)
		f.dbSize, f.quota = was.dbSize, was.quota
	}
	fleet.set(key, f)
}

// controlPlaneFacts are what the fleet collector reports of one control
// plane, as its last pass left them.
type controlPlaneFacts struct {
	conditions []metav1.Condition
	// etcd's members as the status counts them: voters listed, voters
	// healthy, and the members the spec asks for.
	members, healthy, desired int
	// dbSize is the largest database of a member, quota the smallest quota;
	// both zero unless etcd answered in the pass (or, while its answer is
	// awaited, in the pass before).
	dbSize, quota int64
}

func factsOf(s *scope) controlPlaneFacts {
	st := &s.hcp.Status
	f := controlPlaneFacts{
		conditions: slices.Clone(st.Conditions),
		members:    len(st.Etcd.Members),
		desired:    int(etcd.Replicas(s.hcp)),
	}
	if len(st.Etcd.MemberStatuses) > 0 {
		f.members = 0
		for _, m := range st.Etcd.MemberStatuses {
			if m.Role != v1alpha1.EtcdVoter {
				continue
			}
			f.members++
			if m.Healthy {
				f.healthy++
			}
		}
	}
	if m := s.in.Etcd; m != nil && m.Answered {
		for _, member := range m.Members {
			f.dbSize = max(f.dbSize, member.DBSize)
			if member.Quota > 0 && (f.quota == 0 || member.Quota < f.quota) {
				f.quota = member.Quota
			}
		}
		if f.quota == 0 {
			f.quota = contract.EtcdQuotaOf(s.hcp)
		}
	}
	return f
}

// fleetCollector reports, at each scrape, every control plane's conditions
// and etcd as its last pass left them.
type fleetCollector struct {
	condition, members, healthy, desired, dbSize, quota *prometheus.Desc

	mu    sync.Mutex
	facts map[types.NamespacedName]controlPlaneFacts
}

func newFleetCollector() *fleetCollector {
	cp := []string{"namespace", "name"}
	return &fleetCollector{
		condition: prometheus.NewDesc("hostedcp_control_plane_condition",
			"1 for each condition of a control plane, with its status and reason, as its last pass wrote them.",
			append(cp, "type", "status", "reason"), nil),
		members: prometheus.NewDesc("hostedcp_etcd_members",
			"Voting members etcd lists for a control plane (the members recorded while etcd does not answer).", cp, nil),
		healthy: prometheus.NewDesc("hostedcp_etcd_healthy_members",
			"Voting members of a control plane's etcd that answered with a leader in its last pass.", cp, nil),
		desired: prometheus.NewDesc("hostedcp_etcd_desired_members",
			"Members a control plane's spec.etcd.replicas asks for.", cp, nil),
		dbSize: prometheus.NewDesc("hostedcp_etcd_database_size_bytes",
			"The largest database of a member of a control plane's etcd, when etcd answered in its last pass.", cp, nil),
		quota: prometheus.NewDesc("hostedcp_etcd_database_quota_bytes",
			"The backend quota of a control plane's etcd (the smallest a member reports), when etcd answered in its last pass.", cp, nil),
		facts: map[types.NamespacedName]controlPlaneFacts{},
	}
}

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.condition, c.members, c.healthy, c.desired, c.dbSize, c.quota} {
		ch <- d
	}
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for cp, f := range c.facts {
		for _, cond := range f.conditions {
			gauge(c.condition, 1, cp.Namespace, cp.Name, cond.Type, string(cond.Status), cond.Reason)
		}
		gauge(c.members, float64(f.members), cp.Namespace, cp.Name)
		gauge(c.healthy, float64(f.healthy), cp.Namespace, cp.Name)
		gauge(c.desired, float64(f.desired), cp.Namespace, cp.Name)
		if f.quota > 0 {
			gauge(c.dbSize, float64(f.dbSize), cp.Namespace, cp.Name)
			gauge(c.quota, float64(f.quota), cp.Namespace, cp.Name)
		}
	}
}

func (c *fleetCollector) set(cp types.NamespacedName, f controlPlaneFacts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.facts[cp] = f
}

// get is what was set for cp; zero when nothing was.
func (c *fleetCollector) get(cp types.NamespacedName) controlPlaneFacts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.facts[cp]
}

// forget drops a control plane that is gone.
func (c *fleetCollector) forget(cp types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.facts, cp)
}
