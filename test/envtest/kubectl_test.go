package envtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// kubectlCache is kubectl's discovery cache for this test binary.
var kubectlCache = filepath.Join(os.TempDir(), fmt.Sprintf("hcp-kubectl-cache-%d", os.Getpid()))

// kubectl runs the kubectl built beside the test API server.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	// A discovery cache of its own: one left by an earlier API server on the
	// same port would not know this one's kinds.
	cmd := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"),
		append([]string{"--kubeconfig", env.Kubeconfig, "--cache-dir", kubectlCache}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl %v: %s", args, out)
	return string(out)
}

// What `kubectl get hcp` shows a reader, through the short name and the
// cluster-api category.
func TestKubectlGetShowsControlPlanes(t *testing.T) {
	parallel(t)
	ctx := testContext(t)
	ns := namespace(t)
	hcp := base(ns, "shown")
	hcp.Labels = map[string]string{"cluster.x-k8s.io/cluster-name": "shown-cluster"}
	hcp.Spec.ControlPlaneEndpoint.Host, hcp.Spec.ControlPlaneEndpoint.Port = "shown.example.com", 443
	require.NoError(t, env.Client.Create(ctx, hcp))
	// No Cluster owns this control plane, so the controller only says it is
	// not Available for want of one, and leaves these fields alone; the test
	// writes them as it would.
	waitCondition(t, hcp, v1alpha1.AvailableCondition, metav1.ConditionFalse, v1alpha1.WaitingForClusterReason)
	setStatus(t, hcp, func(hcp *v1alpha1.HostedControlPlane) {
		hcp.Status.ReadyReplicas = ptr.To[int32](1)
		hcp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	})

	out := kubectl(t, "get", "hcp", "-n", ns)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, "%s\nall control planes:\n%s", out, kubectl(t, "get", "hostedcontrolplanes", "-A", "--show-labels"))
	assert.Equal(t, []string{"NAME", "CLUSTER", "AVAILABLE", "FAILING", "REASON", "INITIALIZED", "ENDPOINT", "DESIRED", "READY", "VERSION", "AGE"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"shown", "shown-cluster", "False", "Available", v1alpha1.WaitingForClusterReason, "true", "shown.example.com", "2", "1", "v1.33.0"},
		strings.Fields(lines[1])[:10], "the failing condition and its reason")

	setStatus(t, hcp, func(hcp *v1alpha1.HostedControlPlane) {
		hcp.Status.Etcd.VolumeUsage = ptr.To(resource.MustParse("300Mi"))
		hcp.Status.Etcd.VolumeSize = ptr.To(resource.MustParse("8Gi"))
	})
	wideLines := strings.Split(strings.TrimSpace(kubectl(t, "get", "hcp", "-n", ns, "-o", "wide")), "\n")
	wide := strings.Fields(wideLines[0])
	assert.Contains(t, wide, "UP-TO-DATE")
	assert.Contains(t, wide, "ETCD")
	assert.Contains(t, wideLines[0], "ETCD DB")
	assert.Contains(t, wideLines[0], "ETCD VOLUME")
	assert.Contains(t, wideLines[1], "300Mi")
	assert.Contains(t, wideLines[1], "8Gi")

	assert.Contains(t, kubectl(t, "get", "cluster-api", "-n", ns), "hostedcontrolplane.controlplane.cluster.x-k8s.io/shown")
	tmpl := &v1alpha1.HostedControlPlaneTemplate{}
	tmpl.Namespace, tmpl.Name = ns, "shown"
	require.NoError(t, env.Client.Create(ctx, tmpl))
	assert.Contains(t, kubectl(t, "get", "hcpt", "-n", ns), "shown")
}
