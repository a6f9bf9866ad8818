package etcd

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/test/pkitest"
)

// selfSigned is a certificate that is its own CA, PEM encoded.
func selfSigned(t *testing.T, cn string) (cert, key []byte) {
	t.Helper()
	ca, err := pkitest.NewCA(cn)
	require.NoError(t, err)
	key, err = ca.KeyPEM()
	require.NoError(t, err)
	return ca.CertPEM(), key
}

// Clients are kept per cluster and endpoint while the credentials stay;
// rotated credentials replace them and vanished endpoints close theirs.
// Dialling does not block, so no etcd needs to run for this.
func TestCheckerReusesClients(t *testing.T) {
	c := NewChecker()
	t.Cleanup(c.Close)
	cert, key := selfSigned(t, "client")
	target := Target{
		Cluster: types.NamespacedName{Namespace: "ns", Name: "demo"}, ServerName: "demo-etcd.ns.svc",
		Endpoints:   []string{"127.0.0.1:1", "127.0.0.2:1"},
		Credentials: render.Credentials{Cert: cert, Key: key, CA: cert},
	}
	first, err := c.clients(target)
	require.NoError(t, err)
	again, err := c.clients(target)
	require.NoError(t, err)
	assert.Len(t, first, 2)
	for ep, cli := range first {
		assert.Same(t, cli, again[ep], "the client of %s is reused", ep)
	}

	target.Endpoints = []string{"127.0.0.2:1"}
	fewer, err := c.clients(target)
	require.NoError(t, err)
	assert.Len(t, fewer, 1)
	assert.Same(t, first["127.0.0.2:1"], fewer["127.0.0.2:1"])
	assert.Error(t, first["127.0.0.1:1"].Ctx().Err(), "the client of a vanished endpoint is closed")

	target.Credentials.Cert, target.Credentials.Key = selfSigned(t, "rotated")
	rotated, err := c.clients(target)
	require.NoError(t, err)
	assert.NotSame(t, first["127.0.0.2:1"], rotated["127.0.0.2:1"], "new credentials, new client")
	assert.Error(t, first["127.0.0.2:1"].Ctx().Err(), "the client with old credentials is closed")

	c.Forget(target.Cluster)
	assert.Error(t, rotated["127.0.0.2:1"].Ctx().Err(), "Forget closes the cluster's clients")
}

func TestCheckerRejectsACAWithoutCertificates(t *testing.T) {
	cert, key := selfSigned(t, "client")
	_, err := NewChecker().Check(t.Context(), Target{
		Cluster: types.NamespacedName{Namespace: "ns", Name: "demo"}, Credentials: render.Credentials{Cert: cert, Key: key, CA: []byte("junk")},
	})
	assert.EqualError(t, err, "etcd CA of ns/demo: no PEM encoded certificate")
}

// The member list comes from the leader, or another voter, never from a
// learner (which refuses it), whatever the order of their addresses.
func TestListFromAVoter(t *testing.T) {
	learner := Status{Endpoint: "10.0.0.15:2379", MemberID: 2, Leader: 1, Learner: true}
	follower := Status{Endpoint: "10.0.0.2:2379", MemberID: 3, Leader: 1}
	leader := Status{Endpoint: "10.0.0.9:2379", MemberID: 1, Leader: 1}
	down := Status{Endpoint: "10.0.0.1:2379", Err: assert.AnError}
	for name, tc := range map[string]struct {
		statuses []Status
		want     string
	}{
		"the leader first":         {[]Status{down, learner, follower, leader}, leader.Endpoint},
		"a voter without a leader": {[]Status{learner, follower}, follower.Endpoint},
		"a learner with no voter":  {[]Status{down, learner}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := listFrom(tc.statuses)
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, got.Endpoint)
		})
	}
}
