package extension

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// The controller's membership changes against a real etcd, the test playing
// the StatefulSet (it starts the pod of a member the controller added and
// deletes the pod and volume of one it removed): 1 → 3 → 1 members, both
// new members added at once as learners (etcd's --max-learners as the
// controller renders it) and each promoted once it has caught up, the data
// written before intact, and etcd reported unhealthy (which holds every
// change) while a member is down.
func TestMembershipChangesInPlace(t *testing.T) {
	ns := namespace(t)
	c := startEtcdOf(t, "demo", ns, 1, maxMembers)
	c.waitHealthy()
	checker := etcd.NewChecker()
	t.Cleanup(checker.Close)
	ctx := testContext(t)
	_, err := c.client(0).Put(ctx, "/registry/before", "kept")
	require.NoError(t, err)

	made := c.scale(ctx, checker, 3)
	require.Len(t, made, 3)
	assert.Equal(t, "adding members demo-etcd-1 and demo-etcd-2 as learners", made[0])
	assert.ElementsMatch(t, []string{"promoting member demo-etcd-1 to a voter", "promoting member demo-etcd-2 to a voter"}, made[1:],
		"each learner is promoted once it has caught up, in whichever order")
	m := c.observe(ctx, checker)
	assert.Equal(t, []string{"demo-etcd-0", "demo-etcd-1", "demo-etcd-2"}, etcd.Members(m))
	assert.Empty(t, m.Problems)
	resp, err := c.client(2).Get(ctx, "/registry/before")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "a member that joined later has the data written before")
	assert.Equal(t, "kept", string(resp.Kvs[0].Value))

	// A member down: etcd is unhealthy, which holds every change.
	c.stop(2)
	m = c.observe(ctx, checker)
	assert.Equal(t, []string{"member demo-etcd-2 does not answer"}, m.Problems)
	assert.Equal(t, []v1alpha1.EtcdMemberStatus{
		{Name: "demo-etcd-0", ID: fmt.Sprintf("%x", m.Members[0].ID), Role: v1alpha1.EtcdVoter, Healthy: true},
		{Name: "demo-etcd-1", ID: fmt.Sprintf("%x", m.Members[1].ID), Role: v1alpha1.EtcdVoter, Healthy: true},
		{Name: "demo-etcd-2", ID: fmt.Sprintf("%x", m.Members[2].ID), Role: v1alpha1.EtcdVoter, Healthy: false},
	}, etcd.MemberStatuses(m))

	// Back: members leave from the highest ordinal, the leader handing over
	// first when it is the one to go.
	c.join(2, []int{0, 1, 2})
	assert.Equal(t, []string{"removing member demo-etcd-2", "removing member demo-etcd-1"}, c.scale(ctx, checker, 1))
	resp, err = c.client(0).Get(ctx, "/registry/before")
	require.NoError(t, err)
	assert.Len(t, resp.Kvs, 1)
}

// An etcd that holds one learner at a time (etcd 3.5, or max-learners set
// to 1 in spec.etcd.args) refuses the second of the two the controller adds
// at once: the first joins, and the second is added once the first is a
// voter.
func TestMembershipGrowsOneLearnerAtATime(t *testing.T) {
	c := newEtcdCluster(t, "demo", namespace(t), 1, 3)
	c.maxLearners = 1
	c.start(0)
	c.waitHealthy()
	checker := etcd.NewChecker()
	t.Cleanup(checker.Close)
	assert.Equal(t, []string{
		"adding member demo-etcd-1 as a learner (etcd refused the others for now: etcdserver: too many learner members in cluster)",
		"promoting member demo-etcd-1 to a voter",
		"adding member demo-etcd-2 as a learner", "promoting member demo-etcd-2 to a voter",
	}, c.scale(testContext(t), checker, 3))
}

// scale makes the controller's changes until etcd has want voters, and
// returns the changes it made. Like the StatefulSet, it starts each learner
// etcd lists that does not run, with the membership etcd lists.
func (c *etcdCluster) scale(ctx context.Context, checker *etcd.Checker, want int32) []string {
	c.t.Helper()
	var made []string
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		m := c.observe(ctx, checker)
		var listed, learners []int
		for _, member := range m.Members {
			listed = append(listed, ordinal(member.Name))
			if member.Learner {
				learners = append(learners, ordinal(member.Name))
			}
		}
		require.LessOrEqual(c.t, len(learners), etcd.MaxLearners)
		for _, i := range learners {
			if c.members[i] == nil {
				c.join(i, listed)
			}
		}
		next, changes := etcd.NextChange(c.input(want, m), time.Now())
		if !changes {
			if len(learners) == 0 && len(m.Members) == int(want) {
				return made
			}
			time.Sleep(100 * time.Millisecond) // a learner starts or catches up
			continue
		}
		if len(m.Problems) > 0 {
			time.Sleep(100 * time.Millisecond) // the preflight waits for a healthy etcd
			continue
		}
		out, err := checker.Make(ctx, c.target(), m, next, func(member string) string { return c.peerURL(ordinal(member)) })
		require.NoError(c.t, err)
		if out.Message != next.String() && !strings.HasPrefix(out.Message, "adding member") {
			continue // not made yet: a learner catching up, or the leader handed over first
		}
		made = append(made, out.Message)
		if next.Kind == etcd.Remove {
			c.remove(ordinal(next.Name))
		}
	}
	c.t.Fatalf("etcd did not reach %d voters; changes made: %v", want, made)
	return nil
}

// observe is the membership as the controller sees it.
func (c *etcdCluster) observe(ctx context.Context, checker *etcd.Checker) *render.EtcdMembership {
	c.t.Helper()
	t := c.target()
	o, err := checker.Observe(ctx, t)
	require.NoError(c.t, err)
	peers := map[string]string{}
	for i := range c.ips {
		peers[c.peerURL(i)] = fmt.Sprintf("demo-etcd-%d", i)
	}
	return etcd.MembershipOf(o, t.Names, peers)
}

// target is the running members, named as the StatefulSet's pods.
func (c *etcdCluster) target() etcd.Target {
	t := etcd.Target{
		Cluster:     types.NamespacedName{Namespace: c.namespace, Name: c.cluster},
		ServerName:  contract.EtcdServerName(c.cluster, c.namespace),
		Credentials: render.Credentials{Cert: c.clientCert, Key: c.clientKey, CA: c.ca.CertPEM()},
		Names:       map[string]string{},
	}
	for i, p := range c.members {
		if p != nil {
			t.Endpoints = append(t.Endpoints, c.endpoint(i))
			t.Names[c.endpoint(i)] = fmt.Sprintf("demo-etcd-%d", i)
		}
	}
	return t
}

// input is the Input of a control plane demo asking for want members.
func (c *etcdCluster) input(want int32, m *render.EtcdMembership) render.Input {
	c.t.Helper()
	cp := &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: c.namespace}}
	cp.Spec.Version, cp.Spec.Etcd.Replicas = "v1.36.3", ptr.To(want)
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: c.namespace}}
	cluster.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
	in, err := render.NewInput(cp, cluster, render.DefaultSettings())
	require.NoError(c.t, err)
	return in.With(render.Observed{Etcd: m})
}

func ordinal(name string) int {
	var i int
	_, _ = fmt.Sscanf(name, "demo-etcd-%d", &i)
	return i
}

// A database filled to its quota: etcd raises NOSPACE and refuses writes;
// once data is deleted and compacted (what etcd's auto-compaction does) the
// controller defragments the members one at a time, the leader last,
// disarms the alarm, and writes resume. While nothing can be freed it says
// so.
func TestNoSpaceIsDefragmentedAndDisarmed(t *testing.T) {
	ns := namespace(t)
	c := startEtcd(t, "demo", ns)
	checker := etcd.NewChecker()
	t.Cleanup(checker.Close)
	ctx := testContext(t)
	cli := c.client(0)
	value := strings.Repeat("x", 1<<20)
	var err error
	for i := 0; err == nil; i++ {
		require.Less(t, i, 200, "the quota of 100MiB is reached")
		_, err = cli.Put(ctx, fmt.Sprintf("/registry/fill/%03d", i), value)
	}
	require.ErrorIs(t, err, rpctypes.ErrNoSpace)
	require.True(t, c.observe(ctx, checker).NoSpace)

	del, err := cli.Delete(ctx, "/registry/fill/", clientv3.WithPrefix())
	require.NoError(t, err)
	_, err = cli.Compact(ctx, del.Header.Revision, clientv3.WithCompactPhysical())
	require.NoError(t, err)

	var defragmented []string
	var out readiness.Outcome
	leader := ""
	for range 10 {
		m := c.observe(ctx, checker)
		for _, member := range m.Members {
			if member.Leader {
				leader = member.Name
			}
		}
		out, err = checker.Maintain(ctx, c.target(), m, 0)
		require.NoError(t, err)
		t.Log(out.Message)
		if out.Reason != v1alpha1.EtcdDefragmentedReason {
			break
		}
		defragmented = append(defragmented, strings.TrimSuffix(strings.Fields(out.Message)[2], ":"))
		assert.Regexp(t, `^defragmented member demo-etcd-\d: its database went from \d+ MiB to \d+ MiB, \d+ MiB freed in `, out.Message)
	}
	assert.Equal(t, "disarmed the NOSPACE alarm: every member's database is below its quota again", out.Message)
	assert.ElementsMatch(t, []string{"demo-etcd-0", "demo-etcd-1", "demo-etcd-2"}, defragmented)
	assert.Equal(t, leader, defragmented[len(defragmented)-1], "the leader last")
	m := c.observe(ctx, checker)
	assert.False(t, m.NoSpace)
	_, err = cli.Put(ctx, "/registry/after", "written")
	assert.NoError(t, err, "writes resume")

	// A database that holds its quota in data: nothing to defragment, and
	// the alarm stays, said as such.
	m.NoSpace = true
	for i := range m.Members {
		m.Members[i].Quota = 1
	}
	out, err = checker.Maintain(ctx, c.target(), m, 0)
	require.NoError(t, err)
	assert.True(t, out.Warn)
	assert.Regexp(t, `^alarm NOSPACE: etcd refuses writes: member demo-etcd-0 holds \d+ MiB of data and its quota is 0 MiB; delete data, or raise quota-backend-bytes in spec.etcd.args$`, out.Message)
}
