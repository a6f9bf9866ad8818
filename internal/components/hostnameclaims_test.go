package components

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
)

// The claim that takes precedence by Gateway API's rule, the oldest route
// and then the first by namespace/name, is a problem; one that yields is
// only told of, and a claim of another hostname is none.
func TestHostnameClaimsPrecedence(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC))
	ours := &gatewayv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "prod-apiserver", CreationTimestamp: created}}
	ours.Spec.Hostnames = []gatewayv1.Hostname{"prod.team-b.k8s.example.com"}
	claim := func(route string, at time.Duration, host string) render.Input {
		return render.Input{Observed: render.Observed{RouteClaims: []render.RouteClaim{
			{Route: route, Hostname: host, Created: metav1.NewTime(created.Add(at))},
		}}}
	}
	for name, tc := range map[string]struct {
		in      render.Input
		problem bool
		told    bool
	}{
		"older":                      {claim("team-c/squat", -time.Second, "prod.team-b.k8s.example.com"), true, false},
		"as old, first by name":      {claim("team-a/squat", 0, "prod.team-b.k8s.example.com"), true, false},
		"as old, later by name":      {claim("team-c/squat", 0, "prod.team-b.k8s.example.com"), false, true},
		"newer":                      {claim("team-a/squat", time.Second, "prod.team-b.k8s.example.com"), false, true},
		"older, of another hostname": {claim("team-a/squat", -time.Second, "konnectivity.prod.team-b.k8s.example.com"), false, false},
	} {
		t.Run(name, func(t *testing.T) {
			yielding, problem := hostnameClaims(tc.in, ours)
			if tc.problem {
				require.NotNil(t, problem)
				assert.Equal(t, v1alpha1.HostnameConflictReason, problem.Reason)
				assert.True(t, problem.Warn)
				assert.Contains(t, problem.Message, "TLSRoute "+tc.in.RouteClaims[0].Route+" claims the hostname prod.team-b.k8s.example.com of TLSRoute team-b/prod-apiserver")
				return
			}
			assert.Nil(t, problem)
			assert.Equal(t, tc.told, len(yielding) == 1, "%v", yielding)
		})
	}
}
