package components

import (
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/test/pkitest"
)

// Two API servers or more drain one at a time; a single one has no budget,
// which could only ever allow its one pod to go.
func TestAPIServerDisruptionBudget(t *testing.T) {
	for replicas, want := range map[int32]bool{1: false, 2: true, 3: true} {
		in := goldenCase{cp: func(cp *v1alpha1.HostedControlPlane) { cp.Spec.Replicas = ptr.To(replicas) }}.input(t)
		objs, err := APIServer{}.Render(in)
		require.NoError(t, err)
		var budgets []*policyv1.PodDisruptionBudget
		for _, obj := range objs {
			if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
				budgets = append(budgets, pdb)
			}
		}
		if !want {
			assert.Empty(t, budgets, "%d API servers", replicas)
			continue
		}
		if assert.Len(t, budgets, 1, "%d API servers", replicas) {
			assert.Equal(t, in.Selector(contract.APIServerComponent), budgets[0].Spec.Selector.MatchLabels)
			assert.Equal(t, 1, budgets[0].Spec.MaxUnavailable.IntValue())
		}
	}
}

// Each TLSRoute leads to a port the API server's Service has, also when the
// Cluster moves the API server's port.
func TestGatewayRoutesLeadToServicePorts(t *testing.T) {
	for _, port := range []int32{0, 443, 8443} {
		c := goldenCases[0]
		c.cluster = func(cl *clusterv1.Cluster) { cl.Spec.ClusterNetwork.APIServerPort = port }
		objs, err := Exposure{}.Render(c.input(t))
		require.NoError(t, err)
		ports := map[int32]bool{}
		for _, o := range objs {
			if svc, ok := o.(*corev1.Service); ok {
				for _, p := range svc.Spec.Ports {
					ports[p.Port] = true
				}
			}
		}
		routes := 0
		for _, o := range objs {
			if route, ok := o.(*gatewayv1.TLSRoute); ok {
				routes++
				backend := *route.Spec.Rules[0].BackendRefs[0].Port
				assert.True(t, ports[backend], "apiServerPort %d: TLSRoute %s leads to port %d, which the Service has not (%v)", port, route.Name, backend, ports)
			}
		}
		assert.Equal(t, 3, routes, "the API server's, konnectivity's and the tunnel's")
	}
}

// Every directory the controller mounts into the API server container is
// one that admission keeps spec.deployment.apiServer.mounts out of.
func TestAPIServerMountsStayInOwnedPaths(t *testing.T) {
	in := goldenCases[0].input(t) // every file the spec can give
	d, err := apiServerDeployment(in)
	require.NoError(t, err)
	user := map[string]bool{}
	for name := range in.ControlPlane.Spec.Deployment.APIServer.Mounts {
		user[contract.APIServerMountVolume(name)] = true
	}
	api := d.Spec.Template.Spec.Containers[0]
	require.Equal(t, "kube-apiserver", api.Name)
	for _, m := range api.VolumeMounts {
		if user[m.Name] {
			continue
		}
		owned := false
		for _, dir := range contract.APIServerOwnedPaths {
			owned = owned || m.MountPath == dir || strings.HasPrefix(m.MountPath, dir+"/")
		}
		assert.True(t, owned, "volume %s at %s is in none of %v", m.Name, m.MountPath, contract.APIServerOwnedPaths)
	}
}

// New content of a mount rolls the API servers; a change of OIDC
// providers does not, as the API servers reload it; a new audit policy
// does, as they read it at start only.
func TestWhatRollsTheAPIServers(t *testing.T) {
	template := func(in render.Input) map[string]string {
		d, err := apiServerDeployment(in)
		require.NoError(t, err)
		return d.Spec.Template.Annotations
	}
	base := goldenCases[0].input(t)
	before := template(base)

	o := base.Observed
	o.MountDigests = map[string]string{"admission": "changed", "authz": "m2"}
	assert.NotEqual(t, before[MountsHashAnnotation], template(base.With(o))[MountsHashAnnotation], "mount content")

	o = base.Observed
	o.SecretDigests = maps.Clone(o.SecretDigests)
	o.SecretDigests[authenticationName(base)] = "changed"
	assert.Equal(t, before, template(base.With(o)), "authentication configuration")
	o.SecretDigests[auditName(base)] = "changed"
	assert.NotEqual(t, before[render.SecretsHashAnnotation], template(base.With(o))[render.SecretsHashAnnotation], "audit policy")

	none := goldenCases[1].input(t)
	assert.NotContains(t, template(none), MountsHashAnnotation, "no mounts, no new annotation: such control planes do not roll on upgrade")
}

// The management cluster's issuer cannot be one of the API servers' own:
// they would refuse the authentication configuration.
func TestManagementIssuerMustNotBeTheClustersOwn(t *testing.T) {
	in := goldenCases[0].input(t)
	ca, err := pkitest.NewCA("cluster-ca")
	require.NoError(t, err)
	observed := in.Observed
	observed.ClusterCA = ca.CertPEM()
	in = in.With(observed)
	require.NoError(t, CheckManagementIssuer(in))
	for _, own := range []string{"https://kubernetes.default.svc.cluster.local", in.ControlPlane.Spec.ServiceAccountIssuer} {
		observed := in.Observed
		observed.ManagementIssuer = &render.ManagementIssuer{URL: own, Keys: []byte(`{"keys":[]}`)}
		assert.ErrorContains(t, CheckManagementIssuer(in.With(observed)), "is also this cluster's own", own)
	}
}
