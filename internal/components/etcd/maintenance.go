package etcd

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// When a member's database is defragmented: once DefragMinFree of its file
// is unused and that is at least half the file, or, while etcd refuses
// writes for NOSPACE, once anything worth a defragmentation
// (noSpaceMinFree) is. Deleted data leaves unused pages behind only after
// compaction, which etcd runs by itself (auto-compaction).
const (
	DefragMinFree  = 64 << 20
	noSpaceMinFree = 1 << 20
)

// The metrics of defragmentations, served with the controller's others.
var (
	defragSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hostedcp_etcd_defragmentation_duration_seconds",
		Help:    "How long defragmenting one hosted etcd member took.",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 8),
	})
	defragFreed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hostedcp_etcd_defragmentation_freed_bytes_total",
		Help: "Bytes of database files that defragmenting hosted etcd members freed.",
	})
)

func init() { metrics.Registry.MustRegister(defragSeconds, defragFreed) }

// maintain keeps a healthy etcd's databases (see Maintain) and tells what
// it did in an event; acted tells whether it did or reported anything.
func (c Component) maintain(ctx context.Context, r client.Reader, in render.Input) (readiness.Outcome, bool, error) {
	m := in.Etcd
	if c.Clients == nil || !needsMaintenance(m) {
		return readiness.Outcome{}, false, nil
	}
	t, err := c.target(ctx, r, in)
	if err != nil {
		return readiness.Outcome{}, true, err
	}
	out, err := c.Clients.Maintain(ctx, t, m, contract.EtcdQuotaOf(in.ControlPlane))
	if err == nil && !out.Warn && c.Events != nil {
		c.Events.Eventf(in.ControlPlane, nil, corev1.EventTypeNormal, out.Reason, "Maintain", "%s", out.Message)
	}
	return out, true, err
}

// needsMaintenance tells whether an answering etcd, every member healthy,
// has a database to defragment or a NOSPACE alarm.
func needsMaintenance(m *render.EtcdMembership) bool {
	if m == nil || !m.Answered {
		return false
	}
	for _, member := range m.Members {
		if !member.Healthy {
			return false // never while a member is down
		}
	}
	_, defragment := defragTarget(m)
	return defragment || m.NoSpace
}

// Maintain keeps the databases of etcd t, whose membership is m, one step a
// call: a member whose database is mostly unused space is defragmented, one
// at a time and the leader last (a defragmentation blocks the member); once
// none needs it, a NOSPACE alarm is disarmed when every database is below
// its quota again (quota for a member that does not report its own), and
// otherwise reported as a problem.
func (c *Checker) Maintain(ctx context.Context, t Target, m *render.EtcdMembership, quota int64) (readiness.Outcome, error) {
	if next, ok := defragTarget(m); ok {
		return c.defragment(ctx, t, next)
	}
	if !m.NoSpace {
		return readiness.Outcome{}, nil
	}
	for _, member := range m.Members {
		q := cmp.Or(member.Quota, quota)
		if member.DBSize >= q {
			return readiness.Problem(v1alpha1.EtcdNoSpaceReason,
				"alarm NOSPACE: etcd refuses writes: member %s holds %s of data and its quota is %s; delete data, or raise quota-backend-bytes in spec.etcd.args",
				member.Name, mebibytes(member.DBSizeInUse), mebibytes(q)), nil
		}
	}
	_, endpoint := leaderOf(m, t)
	if err := c.DisarmNoSpace(ctx, t, endpoint); err != nil {
		return readiness.Outcome{}, fmt.Errorf("disarm etcd's NOSPACE alarm: %w", err)
	}
	return poll(readiness.Waiting(v1alpha1.EtcdNoSpaceReason, "disarmed the NOSPACE alarm: every member's database is below its quota again")), nil
}

// defragTarget is the member to defragment: the first by ordinal that
// needs it, the leader only when no other member does.
func defragTarget(m *render.EtcdMembership) (render.EtcdMember, bool) {
	minFree := int64(DefragMinFree)
	if m.NoSpace {
		minFree = noSpaceMinFree
	}
	var leader *render.EtcdMember
	for i, member := range m.Members {
		unused := member.DBSize - member.DBSizeInUse
		if unused < minFree || (!m.NoSpace && 2*unused < member.DBSize) {
			continue
		}
		if !member.Leader {
			return member, true
		}
		leader = &m.Members[i]
	}
	if leader != nil {
		return *leader, true
	}
	return render.EtcdMember{}, false
}

// defragment defragments one member and tells the space freed and the time
// it took in the outcome and the metrics.
func (c *Checker) defragment(ctx context.Context, t Target, member render.EtcdMember) (readiness.Outcome, error) {
	endpoint := endpointOf(t, member.Name)
	if endpoint == "" {
		return poll(readiness.Waiting(v1alpha1.EtcdUnhealthyReason, "waiting for member %s to be reachable to defragment it", member.Name)), nil
	}
	start := time.Now()
	if err := c.Defragment(ctx, t, endpoint); err != nil {
		return readiness.Outcome{}, fmt.Errorf("defragment etcd member %s: %w", member.Name, err)
	}
	took := time.Since(start)
	after := member.DBSizeInUse
	if o, err := c.Observe(ctx, t); err == nil {
		for _, s := range o.Statuses {
			if s.Endpoint == endpoint && s.Err == nil {
				after = s.DBSize
			}
		}
	}
	freed := max(member.DBSize-after, 0)
	defragSeconds.Observe(took.Seconds())
	defragFreed.Add(float64(freed))
	return poll(readiness.Waiting(v1alpha1.EtcdDefragmentedReason,
		"defragmented member %s: its database went from %s to %s, %s freed in %s",
		member.Name, mebibytes(member.DBSize), mebibytes(after), mebibytes(freed), took.Round(time.Millisecond))), nil
}

// target is the running etcd of the control plane, reached by its pods.
func (c Component) target(ctx context.Context, r client.Reader, in render.Input) (Target, error) {
	etcdPods := &corev1.PodList{}
	if err := r.List(ctx, etcdPods, client.InNamespace(in.Namespace()), client.MatchingLabels(in.Selector(contract.EtcdComponent))); err != nil {
		return Target{}, fmt.Errorf("list etcd pods: %w", err)
	}
	return PodsTarget(ctx, r, types.NamespacedName{Namespace: in.Namespace(), Name: in.ClusterName()}, etcdPods.Items)
}

// endpointOf is the endpoint of the member's pod; empty when it has none.
func endpointOf(t Target, name string) string {
	for ep, pod := range t.Names {
		if pod == name {
			return ep
		}
	}
	return ""
}
