package extension

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hostedcp/cluster-api-provider-hosted/test/pkitest"
)

// newCA is a test CA for an etcd cluster's certificates.
func newCA(t testing.TB, name string) *pkitest.KeyPair {
	t.Helper()
	ca, err := pkitest.NewCA(name)
	require.NoError(t, err)
	return ca
}

// issue signs a client certificate or, with hosts, one that also serves
// them, and returns it and its key, PEM encoded.
func issue(t testing.TB, ca *pkitest.KeyPair, name string, hosts ...string) (cert, key []byte) {
	t.Helper()
	kp, err := ca.Issue(name, nil, hosts...)
	require.NoError(t, err)
	key, err = kp.KeyPEM()
	require.NoError(t, err)
	return kp.CertPEM(), key
}
