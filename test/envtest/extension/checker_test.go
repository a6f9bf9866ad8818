package extension

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
)

// The checker against a real etcd, as the controller publishes it: it finds
// the members, reads their quota, verifies the serving certificate's name,
// and judges the database size against the quota.
func TestCheckerAgainstRealEtcd(t *testing.T) {
	ns := namespace(t)
	cluster := startEtcd(t, "demo", ns)
	cluster.publish()
	target, err := etcd.TargetFor(testContext(t), k8s, types.NamespacedName{Namespace: ns, Name: "demo"})
	require.NoError(t, err)
	assert.Equal(t, []string{cluster.endpoint(0), cluster.endpoint(1), cluster.endpoint(2)}, target.Endpoints)
	assert.Equal(t, "demo-etcd."+ns+".svc", target.ServerName)

	checker := etcd.NewChecker()
	t.Cleanup(checker.Close)
	o, err := checker.Observe(testContext(t), target)
	require.NoError(t, err)
	var names []string
	for _, m := range o.Members {
		names = append(names, m.Name)
	}
	assert.ElementsMatch(t, []string{"member-0", "member-1", "member-2"}, names)
	for _, s := range o.Statuses {
		require.NoError(t, s.Err)
		assert.NotZero(t, s.Leader)
		assert.Equal(t, int64(100<<20), s.DBSizeQuota, "the quota etcd runs with (--quota-backend-bytes)")
	}
	assert.True(t, etcd.Evaluate(o, etcd.DefaultQuotaRatio).Healthy(), etcd.Evaluate(o, etcd.DefaultQuotaRatio).String())

	// Any database is too large for a quota ratio of a millionth.
	report := etcd.Evaluate(o, 1e-6)
	require.Len(t, report.Problems, 3)
	assert.Regexp(t, `^member member-0 database is 0 MiB, 0% of its 100 MiB quota \(limit 0.0001%\)$`, report.Problems[0])

	// Another name than the certificate's: no member is trusted.
	target.ServerName = "other.example.com"
	report, err = checker.Check(testContext(t), target)
	require.NoError(t, err)
	assert.Equal(t, []string{
		fmt.Sprintf("no answer from %s", cluster.endpoint(0)), fmt.Sprintf("no answer from %s", cluster.endpoint(1)),
		fmt.Sprintf("no answer from %s", cluster.endpoint(2)), "no member answers",
	}, report.Problems)
}
