package backup

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// A pass whose cached control plane has not seen the last snapshot
// recorded, or the backup-now request already taken, is behind the API
// server and takes no snapshot; one that has seen them is not.
func TestBehind(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(s))
	stored := func(key string, asked bool) *v1alpha1.HostedControlPlane {
		hcp := &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo"}}
		hcp.Status.Etcd.LastBackupKey = key
		if asked {
			hcp.Annotations = map[string]string{v1alpha1.BackupNowAnnotation: "me"}
		}
		return hcp
	}
	for name, tc := range map[string]struct {
		cached, live *v1alpha1.HostedControlPlane
		behind       bool
	}{
		"a snapshot recorded since":   {stored("ns/demo/1.db", true), stored("ns/demo/2.db", false), true},
		"the first snapshot recorded": {stored("", true), stored("ns/demo/1.db", false), true},
		"the request taken":           {stored("ns/demo/1.db", true), stored("ns/demo/1.db", false), true},
		"asked, up to date":           {stored("ns/demo/1.db", true), stored("ns/demo/1.db", true), false},
		"due, up to date":             {stored("ns/demo/1.db", false), stored("ns/demo/1.db", false), false},
	} {
		live := fake.NewClientBuilder().WithScheme(s).WithObjects(tc.live).Build()
		got, err := (&Reconciler{apiReader: live}).behind(t.Context(), tc.cached)
		require.NoError(t, err, name)
		assert.Equal(t, tc.behind, got, name)
	}
}
