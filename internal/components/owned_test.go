package components

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Every owned flag is one the renderer sets, so admission refuses only
// overrides of what the controller really decides. The controllers' secure
// port is the exception: the probes rely on its default without setting it.
func TestOwnedFlagsAreRendered(t *testing.T) {
	c := goldenCases[1] // with a pod network, so the controller manager's CIDR flags are set
	tuned := c.cp
	c.cp = func(cp *v1alpha1.HostedControlPlane) {
		tuned(cp)
		cp.Spec.Deployment.APIServer.Args = nil
	}
	in := c.input(t)
	rendered := map[string]bool{}
	for _, obj := range renderAll(t, in) {
		var pod corev1.PodSpec
		switch o := obj.(type) {
		case *appsv1.Deployment:
			pod = o.Spec.Template.Spec
		case *appsv1.StatefulSet:
			pod = o.Spec.Template.Spec
		case *appsv1.DaemonSet:
			pod = o.Spec.Template.Spec
		default:
			continue
		}
		for _, c := range pod.Containers {
			for _, arg := range c.Args {
				name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
				rendered[c.Name+"/"+name] = true
			}
			// etcd reads each flag from ETCD_<FLAG> as well.
			for _, env := range c.Env {
				if flag, ok := strings.CutPrefix(env.Name, "ETCD_"); ok && c.Name == "etcd" {
					rendered[c.Name+"/"+strings.ReplaceAll(strings.ToLower(flag), "_", "-")] = true
				}
			}
		}
	}
	for container, owned := range map[string]contract.OwnedFlags{
		"kube-apiserver":          contract.APIServerOwnedFlags,
		"konnectivity-server":     contract.KonnectivityServerOwnedFlags,
		"etcd":                    contract.EtcdOwnedFlags,
		"kube-controller-manager": contract.ControllerManagerOwnedFlags,
		"kube-scheduler":          contract.SchedulerOwnedFlags,
		KonnectivityAgentName:     contract.KonnectivityAgentOwnedFlags,
		CoreDNSName:               contract.CoreDNSOwnedFlags,
		KubeProxyName:             contract.KubeProxyOwnedFlags,
	} {
		for _, flag := range slices.Sorted(maps.Keys(owned)) {
			if flag == "secure-port" && container != "kube-apiserver" {
				continue
			}
			assert.True(t, rendered[container+"/"+flag], "%s owns --%s but does not set it", container, flag)
			assert.NotEmpty(t, owned[flag], "%s --%s says why", container, flag)
		}
	}
}

func TestOwnedFlagsMatchEitherSpelling(t *testing.T) {
	why, ok := contract.EtcdOwnedFlags.Why("data_dir")
	assert.True(t, ok)
	assert.Equal(t, "it is where the member's volume is mounted", why)
	_, ok = contract.EtcdOwnedFlags.Why("quota-backend-bytes")
	assert.False(t, ok, "tuning stays open")
}

// The CoreDNS table spans exactly the minor versions admission lets
// through (etcd's is checked in its package).
func TestCoreDNSTableCoversTheSupportedVersions(t *testing.T) {
	require.True(t, v1alpha1.IsSupportedVersion(semver.Version{Major: v1alpha1.KubernetesMajor, Minor: coreDNSVersions[0].Minor}))
	assert.Equal(t, uint64(v1alpha1.MinKubernetesMinor), coreDNSVersions[0].Minor, "the table starts at the lowest supported minor")
	assert.Equal(t, uint64(v1alpha1.MaxKubernetesMinor), coreDNSVersions[len(coreDNSVersions)-1].Minor, "the table ends at the highest supported minor")
}
