package envtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/rollout"
)

// nextReleaseFlag is the flag the next release's build adds to every
// component (render.Flags): no real pod runs here, so no binary has to take
// it.
const nextReleaseFlag = "--next-release-flag=true"

// buildNextRelease builds the controller as a next release would be: another
// release stamp, and a rendering that adds nextReleaseFlag to every
// component's arguments, through a go build overlay of render/pod.go; with
// mustRoll, the release also raises contract.RenderingLevel.
func buildNextRelease(t *testing.T, mustRoll bool) string {
	t.Helper()
	dir := t.TempDir()
	replace := map[string]string{}
	edit := func(file, anchor, with string) {
		path := filepath.Join(env.Root, file)
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Contains(t, string(src), anchor, "%s changed: point the next release's build at it again", file)
		changed := filepath.Join(dir, filepath.Base(file))
		require.NoError(t, os.WriteFile(changed, []byte(strings.Replace(string(src), anchor, with, 1)), 0o600))
		replace[path] = changed
	}
	const anchor = "\tmerged := maps.Clone(defaults)\n"
	edit("internal/components/render/pod.go", anchor, anchor+"\tmerged[\"next-release-flag\"] = []string{\"true\"}\n")
	if mustRoll {
		edit("internal/contract/release.go", "const RenderingLevel = 0\n", "const RenderingLevel = 1\n")
	}
	overlay, err := json.Marshal(map[string]any{"Replace": replace})
	require.NoError(t, err)
	overlayFile := filepath.Join(dir, "overlay.json")
	require.NoError(t, os.WriteFile(overlayFile, overlay, 0o600))
	bin, err := Build(env.Root, "./cmd/controller", dir, "-overlay", overlayFile,
		"-ldflags", "-X github.com/hostedcp/cluster-api-provider-hosted/internal/contract.Release=v0.2.0-next")
	require.NoError(t, err)
	return bin
}

// withControllerBinary runs bin as the shared controller until the test
// ends, as an upgrade of the controller's Deployment would.
func withControllerBinary(t *testing.T, bin string, settings ...string) {
	t.Helper()
	stopController(t)
	restarted, err := env.StartControllerBinary(bin, settings...)
	if err != nil {
		controller, _ = env.StartController(binDir)
		t.Fatalf("start %s: %v", bin, err)
	}
	controller = restarted
	t.Cleanup(func() {
		stopController(t)
		// A pass that panics still writes its status (a deferred patch)
		// but skips what follows it, such as the events it tells.
		assert.NotContains(t, restarted.Output(), "Observed a panic", "the controller %s panicked", bin)
		var err error
		controller, err = env.StartController(binDir)
		require.NoError(t, err, "start the controller of this build again")
	})
}

// workload is one of a control plane's workloads as read: its generation
// and pod template.
type workload struct {
	generation int64
	template   corev1.PodTemplateSpec
	args       []string
}

// workloads reads the four workloads of control plane name in ns.
func workloads(t *testing.T, ns, name string) map[string]workload {
	t.Helper()
	out := map[string]workload{}
	sts := get(t, &appsv1.StatefulSet{}, ns, name+"-etcd")
	out["StatefulSet "+sts.Name] = workload{sts.Generation, sts.Spec.Template, sts.Spec.Template.Spec.Containers[0].Args}
	for _, suffix := range []string{"apiserver", "controller-manager", "scheduler"} {
		d := get(t, &appsv1.Deployment{}, ns, name+"-"+suffix)
		out["Deployment "+d.Name] = workload{d.Generation, d.Spec.Template, d.Spec.Template.Spec.Containers[0].Args}
	}
	return out
}

// The controller is upgraded to a release that renders every component
// differently: no pod template changes, and status.rollout.pending names
// each workload and the field that would change, in an event too. A
// spec.rollout.after in the future changes nothing; once reached, the
// components roll in order with the new rendering, and nothing is pending.
func TestControllerUpgradeRestartsNoPod(t *testing.T) {
	serial(t)
	_, hcp := readyControlPlane(t, "held", "v1.36.3")
	ns := hcp.Namespace
	before := workloads(t, ns, "held")
	for name, w := range before {
		require.NotContains(t, w.args, nextReleaseFlag, name)
	}

	withControllerBinary(t, buildNextRelease(t, false))
	waitFor(t, "status.rollout.pending names every workload", func() error {
		require.NoError(t, env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp))
		var got []string
		for _, p := range hcp.Status.Rollout.Pending {
			got = append(got, p.Object)
		}
		if len(got) != len(before) {
			return fmt.Errorf("pending %v", got)
		}
		return nil
	})
	for _, p := range hcp.Status.Rollout.Pending {
		require.Contains(t, before, p.Object)
		containers := map[string][]string{
			"StatefulSet held-etcd": {"etcd"}, "Deployment held-apiserver": {"konnectivity-server", "kube-apiserver"},
			"Deployment held-controller-manager": {"kube-controller-manager"}, "Deployment held-scheduler": {"kube-scheduler"},
		}[p.Object]
		var changes []string
		for _, c := range containers {
			changes = append(changes, "spec.containers["+c+"].args")
		}
		assert.Equal(t, changes, p.Changes, p.Object)
		assert.False(t, p.MustRoll, p.Object)
		assert.True(t, strings.HasPrefix(p.RenderedBy, "v0.2.0-next+"), p.RenderedBy)
	}
	events := &corev1.EventList{}
	require.NoError(t, env.Client.List(testContext(t), events, client.InNamespace(ns)))
	assert.True(t, slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
		return e.Reason == v1alpha1.RolloutPendingReason && e.Type == corev1.EventTypeNormal &&
			strings.Contains(e.Message, "Deployment held-apiserver (spec.containers[konnectivity-server].args, spec.containers[kube-apiserver].args)")
	}), "a RolloutPending event names what is held; events: %v", eventNotes(events.Items))
	assert.Equal(t, before, workloads(t, ns, "held"), "no pod template changed")

	// A rollout asked for later changes nothing yet.
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Rollout.After = metav1.NewTime(time.Now().Add(time.Hour))
	}))
	waitFor(t, "the controller saw the rollout asked for later", func() error {
		require.NoError(t, env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp))
		if hcp.Status.ObservedGeneration != hcp.Generation {
			return fmt.Errorf("observed generation %d of %d", hcp.Status.ObservedGeneration, hcp.Generation)
		}
		return nil
	})
	assert.Len(t, hcp.Status.Rollout.Pending, len(before))
	assert.Equal(t, before, workloads(t, ns, "held"), "a rollout after an hour changed a pod template")

	// Reached, it rolls etcd, then the API servers, then the controllers.
	after := time.Now().Truncate(time.Second)
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) { h.Spec.Rollout.After = metav1.NewTime(after) }))
	rolled := func(kind, name string) {
		waitFor(t, kind+" "+name+" rolls with the new rendering", func() error {
			w := workloads(t, ns, "held")[kind+" "+name]
			if !slices.Contains(w.args, nextReleaseFlag) {
				return fmt.Errorf("args %v", w.args)
			}
			if got := w.template.Annotations[rollout.RestartedAtAnnotation]; got != after.UTC().Format(time.RFC3339) {
				return fmt.Errorf("restarted-at %q", got)
			}
			return nil
		})
	}
	rolled("StatefulSet", "held-etcd")
	rollOutStatefulSet(t, ns, "held-etcd")
	rolled("Deployment", "held-apiserver")
	rollOutDeployment(t, ns, "held-apiserver")
	rolled("Deployment", "held-controller-manager")
	rolled("Deployment", "held-scheduler")
	waitFor(t, "nothing is pending", func() error {
		require.NoError(t, env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp))
		if p := hcp.Status.Rollout.Pending; len(p) > 0 {
			return fmt.Errorf("pending %v", p)
		}
		return nil
	})
}

// A release marks its change as one that must roll: control planes roll
// without being asked, one at a time. The second waits while the first
// rolls out, and follows once the first is done.
func TestMustRollRollsOneControlPlaneAtATime(t *testing.T) {
	serial(t)
	_, one := readyControlPlane(t, "must-a", "v1.36.3")
	_, two := readyControlPlane(t, "must-b", "v1.36.3")
	// The control planes of other tests, whose rollouts nobody plays here,
	// would take turns too: their Clusters are paused meanwhile.
	pauseOtherClusters(t, one.Namespace, two.Namespace)
	withControllerBinary(t, buildNextRelease(t, true), "MUST_ROLL_INTERVAL=0s")

	rolledEtcd := func(hcp *v1alpha1.HostedControlPlane) bool {
		return slices.Contains(workloads(t, hcp.Namespace, hcp.Name)["StatefulSet "+hcp.Name+"-etcd"].args, nextReleaseFlag)
	}
	var first, second *v1alpha1.HostedControlPlane
	waitFor(t, "one control plane takes the turn", func() error {
		switch a, b := rolledEtcd(one), rolledEtcd(two); {
		case a && b:
			t.Fatal("both control planes roll at once")
		case a:
			first, second = one, two
		case b:
			first, second = two, one
		default:
			return fmt.Errorf("neither rolls")
		}
		return nil
	})
	waitFor(t, "the other waits for its turn", func() error {
		require.NoError(t, env.Client.Get(testContext(t), client.ObjectKeyFromObject(second), second))
		for _, p := range second.Status.Rollout.Pending {
			if p.Object == "StatefulSet "+second.Name+"-etcd" && p.MustRoll {
				return nil
			}
		}
		return fmt.Errorf("pending %+v", second.Status.Rollout.Pending)
	})
	assert.False(t, rolledEtcd(second), "the second waits while the first rolls")

	ns := first.Namespace
	rollOutStatefulSet(t, ns, first.Name+"-etcd")
	waitFor(t, "the first's API servers roll", func() error {
		if !slices.Contains(workloads(t, ns, first.Name)["Deployment "+first.Name+"-apiserver"].args, nextReleaseFlag) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	assert.False(t, rolledEtcd(second), "the second waits until the first is done")
	rollOutDeployment(t, ns, first.Name+"-apiserver")
	waitFor(t, "the first's controllers roll", func() error {
		w := workloads(t, ns, first.Name)
		for _, name := range []string{"controller-manager", "scheduler"} {
			if !slices.Contains(w["Deployment "+first.Name+"-"+name].args, nextReleaseFlag) {
				return fmt.Errorf("%s not yet", name)
			}
		}
		return nil
	})
	rollOutDeployment(t, ns, first.Name+"-controller-manager")
	rollOutDeployment(t, ns, first.Name+"-scheduler")
	waitFor(t, "the second takes its turn once the first is done", func() error {
		if !rolledEtcd(second) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
}

// clusterctl move waits while clusterctl's block-move annotation is on an
// object it would move, then fails: every control plane carries it, with
// why it cannot be moved and how to move it instead.
func TestClusterctlMoveIsBlocked(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	hcp := newControlPlane(t, newCluster(t, ns, "unmovable", 0), func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureClusterIP}
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 1}
	})
	waitFor(t, "the control plane blocks clusterctl move", func() error {
		require.NoError(t, env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp))
		msg, ok := hcp.Annotations[clusterctlv1.BlockMoveAnnotation]
		if !ok {
			return fmt.Errorf("annotations %v", hcp.Annotations)
		}
		assert.Contains(t, msg, "cannot be moved by clusterctl move")
		assert.Contains(t, msg, "spec.etcd.restore")
		return nil
	})
}

// pauseOtherClusters pauses every Cluster outside the namespaces given until
// the test ends.
func pauseOtherClusters(t *testing.T, namespaces ...string) {
	t.Helper()
	clusters := &clusterv1.ClusterList{}
	require.NoError(t, env.Client.List(testContext(t), clusters))
	for i := range clusters.Items {
		c := &clusters.Items[i]
		if slices.Contains(namespaces, c.Namespace) || ptr.Deref(c.Spec.Paused, false) {
			continue
		}
		require.NoError(t, update(t, c, func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) }))
		t.Cleanup(func() {
			err := update(t, c, func(c *clusterv1.Cluster) { c.Spec.Paused = nil })
			if !apierrors.IsNotFound(err) {
				assert.NoError(t, err, "unpause Cluster %s/%s", c.Namespace, c.Name)
			}
		})
	}
}

// eventNotes are the reasons and messages of events, for a failure to show.
func eventNotes(events []corev1.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}
