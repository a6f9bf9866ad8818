package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	rolloutstamp "github.com/hostedcp/cluster-api-provider-hosted/internal/rollout"
	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/local"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/provider"
)

// providerDir is the provider's directory in a clusterctl repository, as
// make release writes it.
const providerDir = "control-plane-hosted-control-plane"

// clusterctlRun tells whether the suite runs TestClusterctl alone, with the
// provider left for clusterctl to install (make test-clusterctl).
func clusterctlRun() bool { return os.Getenv("E2E_CLUSTERCTL") != "" }

// TestClusterctl installs, upgrades and deletes the provider as a platform
// team does, with a real clusterctl (E2E_CLUSTERCTL, built by make
// clusterctl at our Cluster API version) from a local repository
// (E2E_CLUSTERCTL_REPOSITORY, where make test-clusterctl wrote two releases
// or more: the oldest from main before upgrades of the controller held
// rendering changes back, CLUSTERCTL_BASE, the newest from this tree):
// clusterctl init installs the oldest release, whose images were imported
// from its OCI archives; hosted Clusters of every exposure the local
// cluster serves (LoadBalancer, NodePort, Gateway) and one restored from
// another's snapshot become Available; clusterctl describe cluster shows a
// control plane's conditions; clusterctl get kubeconfig prints a kubeconfig
// that reaches each API server; clusterctl upgrade plan offers the newest
// release and clusterctl upgrade apply installs it, after which the new
// controller has taken over every workload of every control plane, no
// hosted pod was replaced or restarted, and each control plane's
// status.rollout.pending says which workloads the new release renders
// differently and which fields of their pods it changes; spec.rollout.after
// then rolls each control plane to the new rendering, which serves as
// before and keeps its data; clusterctl move is refused while the control
// plane carries our block-move annotation; clusterctl delete removes the
// provider.
//
// The suite's Cluster API core provider was installed from its module, as
// every run installs it; the test records it in clusterctl's inventory and
// labels its CRDs as clusterctl init would have, and serves its components
// and metadata from
// the same local repository, so that clusterctl finds the contract it
// implements.
func TestClusterctl(t *testing.T) {
	if !clusterctlRun() {
		t.Skip("run with make test-clusterctl")
	}
	ctl := newClusterctl(t, os.Getenv("E2E_CLUSTERCTL"), os.Getenv("E2E_CLUSTERCTL_REPOSITORY"))
	from, to := ctl.releases[0], ctl.releases[len(ctl.releases)-1]
	t.Logf("releases %v: installing %s, upgrading to %s", ctl.releases, from, to)
	for _, v := range ctl.releases {
		archives, err := filepath.Glob(filepath.Join(ctl.dist, providerDir, v, "images", "*.tar"))
		require.NoError(t, err)
		require.NotEmpty(t, archives, "release %s has no image archives", v)
		require.NoError(t, mgmt.ImportPinned(testContext(t), archives...))
	}

	t.Run("clusterctl init installs the oldest release", func(t *testing.T) {
		out := ctl.run(t, "init", "--control-plane", "hosted-control-plane:"+from, "--wait-providers", "--wait-provider-timeout", "600")
		assert.Contains(t, out, `provider="control-plane-hosted-control-plane" version="`+from+`"`)
		assert.Equal(t, ctl.pinned(t, from, "controller"), controllerImage(t))
		eventually(t, 2*time.Minute, "the extension is discovered", func() error {
			return provider.ExtensionDiscovered(testContext(t), k8s)
		})
	})

	ns := namespace(t, "clusterctl")
	keys := startClusters(t, ns)
	key := keys[0]

	t.Run("clusterctl describe cluster shows the control plane's conditions", func(t *testing.T) {
		out := ctl.run(t, "describe", "cluster", key.Name, "-n", ns, "--show-conditions", "all")
		assert.Contains(t, out, "HostedControlPlane "+key.String())
		for _, c := range []string{v1alpha1.EtcdReadyCondition, v1alpha1.APIServerReadyCondition, v1alpha1.CertificatesReadyCondition} {
			assert.Contains(t, out, c)
		}
	})

	t.Run("clusterctl get kubeconfig reaches each hosted API server", func(t *testing.T) {
		for _, k := range keys {
			ctl.reachAPIServer(t, k)
		}
	})

	// Written into the restored cluster, read back after its etcd rolled.
	restored := keys[len(keys)-1]
	written := writeKept(t, restored)
	before := hostedPods(t, ns)
	t.Run("clusterctl upgrade plan offers the newest release", func(t *testing.T) {
		out := ctl.run(t, "upgrade", "plan")
		assert.Regexp(t, `(?m)^control-plane-hosted-control-plane\s+hosted-control-plane-system\s+ControlPlaneProvider\s+`+
			regexp.QuoteMeta(from)+`\s+`+regexp.QuoteMeta(to)+`\s*$`, out)
	})

	t.Run("clusterctl upgrade apply installs it, no hosted pod restarts and the new rendering is pending", func(t *testing.T) {
		ctl.run(t, "upgrade", "apply", "--control-plane", "hosted-control-plane-system/hosted-control-plane:"+to,
			"--wait-providers", "--wait-provider-timeout", "600")
		assert.Equal(t, ctl.pinned(t, to, "controller"), controllerImage(t))
		eventually(t, 5*time.Minute, "every workload of the control planes is "+to+"'s or held for it", func() error {
			for _, k := range keys {
				if err := renderedBy(t, k, to, true); err != nil {
					return err
				}
			}
			return nil
		})
		for _, k := range keys {
			require.NoError(t, local.WaitAvailable(testContext(t), k8s, k, time.Minute))
			hcp := &v1alpha1.HostedControlPlane{}
			require.NoError(t, k8s.Get(testContext(t), k, hcp))
			t.Logf("%s: renderings held for the next rollout: %+v", k, hcp.Status.Rollout.Pending)
			// The oldest release stamped no workload: every one it rendered
			// differently is held, and says what it changes.
			assert.NotEmpty(t, hcp.Status.Rollout.Pending, "%s: nothing pending", k)
			for _, p := range hcp.Status.Rollout.Pending {
				assert.NotEmpty(t, p.Changes, "%s: %s", k, p.Object)
				assert.True(t, strings.HasPrefix(p.RenderedBy, to+"+"), "%s: %s held for %s", k, p.Object, p.RenderedBy)
				assert.False(t, p.MustRoll, "%s: %s", k, p.Object)
			}
		}
		if !assert.Equal(t, before, hostedPods(t, ns), "the hosted pods, their UIDs and restarts") {
			logRestarts(t, ns)
		}
	})

	t.Run("spec.rollout.after rolls each control plane to the new rendering", func(t *testing.T) {
		// One at a time, as a platform would (and as two cores can start
		// them).
		for _, k := range keys {
			start := time.Now()
			after := start.UTC().Truncate(time.Second).Format(time.RFC3339)
			require.NoError(t, k8s.Patch(testContext(t), &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}},
				client.RawPatch(types.MergePatchType, []byte(`{"spec":{"rollout":{"after":"`+after+`"}}}`))))
			eventually(t, 15*time.Minute, k.String()+": every workload is "+to+"'s, nothing pending, every pod replaced", func() error {
				if err := renderedBy(t, k, to, false); err != nil {
					return err
				}
				return replaced(t, k, before)
			})
			require.NoError(t, local.WaitAvailable(testContext(t), k8s, k, 10*time.Minute))
			t.Logf("%s rolled and Available in %s", k, time.Since(start).Round(time.Second))
			ctl.reachAPIServer(t, k)
		}
		readKept(t, restored, written)
	})

	rolled := hostedPods(t, ns)
	t.Run("clusterctl move is refused", func(t *testing.T) {
		hcp := &v1alpha1.HostedControlPlane{}
		require.NoError(t, k8s.Get(testContext(t), key, hcp))
		assert.Contains(t, hcp.Annotations["clusterctl.cluster.x-k8s.io/block-move"], "cannot be moved by clusterctl move")
		// The target is the same cluster: clusterctl checks it holds every
		// provider, pauses the Clusters and waits (about six minutes) for the
		// block to go before it writes anything.
		out, err := ctl.output("move", "-n", ns, "--to-kubeconfig", mgmt.Kubeconfig)
		t.Logf("clusterctl move: %v\n%s", err, out)
		require.Error(t, err)
		assert.Contains(t, out, "resource is not ready to move")
		assert.Contains(t, out, "HostedControlPlane")
		// clusterctl leaves the Clusters paused, as after any failed move.
		for _, k := range keys {
			c := &clusterv1.Cluster{}
			require.NoError(t, k8s.Get(testContext(t), k, c))
			require.NoError(t, k8s.Patch(testContext(t), c, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":false}}`))))
		}
		assert.Equal(t, rolled, hostedPods(t, ns), "the hosted pods, their UIDs and restarts")
	})

	t.Run("clusterctl delete removes the provider", func(t *testing.T) {
		deleteClusters(t, keys...)
		ctl.run(t, "delete", "--control-plane", "hosted-control-plane", "--include-crd", "--include-namespace")
		eventually(t, 3*time.Minute, "the provider is gone", func() error {
			ctx := testContext(t)
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: "hosted-control-plane-system", Name: "hcp-controller"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Deployment hcp-controller still there (%w)", err)
			}
			if err := k8s.Get(ctx, client.ObjectKey{Name: "hostedcontrolplanes.controlplane.cluster.x-k8s.io"}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("CRD hostedcontrolplanes still there (%w)", err)
			}
			return nil
		})
		out := ctl.run(t, "upgrade", "plan")
		assert.NotContains(t, out, "hosted-control-plane", "the inventory no longer lists the provider")
	})
}

// startClusters creates in ns, under the release clusterctl installed, a
// hosted Cluster of each exposure the local cluster serves: LoadBalancer
// (backed up into a versitygw store), NodePort and the suite's Gateway; and,
// once the first is Available and its snapshot stored, a fourth whose etcd
// restores that snapshot (with the first's encryption key copied, as the
// README tells). It returns their keys, the restored one last, once every
// one is Available.
func startClusters(t *testing.T, ns string) []client.ObjectKey {
	t.Helper()
	store := startBackupStore(t, "clusterctl-backups")
	store.grant(t, ns)
	keys := []client.ObjectKey{{Namespace: ns, Name: "ctl"}, {Namespace: ns, Name: "nodeport"}, {Namespace: ns, Name: "gateway"}}
	apply(t, ns, hostedCluster(keys[0].Name, images.KubeVersion, 1, 1))
	apply(t, ns, hostedCluster(keys[1].Name, images.KubeVersion, 1, 1)+"  exposure: {type: NodePort}\n")
	apply(t, ns, gatewayCluster(keys[2].Name, provider.GatewayName, provider.GatewayNamespace))
	start := time.Now()
	for _, k := range keys {
		require.NoError(t, local.WaitAvailable(testContext(t), k8s, k, 15*time.Minute))
		t.Logf("%s Available %s after the Clusters were created", k, time.Since(start).Round(time.Second))
	}
	snapshotStored(t, store, keys[0])

	ctx := testContext(t)
	restored := client.ObjectKey{Namespace: ns, Name: "restored"}
	kept := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: keys[0].Name + "-encryption"}, kept))
	require.NoError(t, k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: restored.Name + "-encryption", Labels: map[string]string{userInput: "true"}},
		Data:       map[string][]byte{"encryption-config.yaml": kept.Data["encryption-config.yaml"]},
	}))
	apply(t, ns, restoredCluster(restored.Name, store.secretNamespace, keys[0].String(), 1, 1))
	start = time.Now()
	require.NoError(t, local.WaitAvailable(ctx, k8s, restored, 15*time.Minute))
	t.Logf("%s Available %s after its Cluster was created", restored, time.Since(start).Round(time.Second))
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(ctx, restored, hcp))
	require.NotNil(t, hcp.Status.Etcd.RestoredFrom, "%s restored", restored)
	t.Logf("%s restored from %+v", restored, *hcp.Status.Etcd.RestoredFrom)
	for _, k := range append(keys, restored) {
		eventually(t, 5*time.Minute, "the pods of "+k.String()+" are ready", func() error {
			return readyPods(t, k.Namespace, k.Name+"-apiserver", 1)
		})
	}
	return append(keys, restored)
}

// reachAPIServer checks that clusterctl get kubeconfig prints a kubeconfig
// that reaches the API server of the Cluster key.
func (c *clusterctlCLI) reachAPIServer(t *testing.T, key client.ObjectKey) {
	t.Helper()
	kubeconfig := c.run(t, "get", "kubeconfig", key.Name, "-n", key.Namespace)
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	require.NoError(t, err)
	cfg.Dial = cluster.DialContext
	hosted, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	version, err := hosted.Discovery().ServerVersion()
	require.NoError(t, err, key.String())
	assert.Equal(t, images.KubeVersion, version.GitVersion, key.String())
}

// writeKept writes a ConfigMap of unique content into the workload cluster
// of key and returns the content.
func writeKept(t *testing.T, key client.ObjectKey) string {
	t.Helper()
	hosted, err := kubernetes.NewForConfig(hostedConfig(t, key.Namespace, key.Name))
	require.NoError(t, err)
	value := randomHex(t)
	_, err = hosted.CoreV1().ConfigMaps("default").Create(testContext(t), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"value": value},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return value
}

// readKept checks that the workload cluster of key still holds what
// writeKept wrote.
func readKept(t *testing.T, key client.ObjectKey, value string) {
	t.Helper()
	hosted, err := kubernetes.NewForConfig(hostedConfig(t, key.Namespace, key.Name))
	require.NoError(t, err)
	cm, err := hosted.CoreV1().ConfigMaps("default").Get(testContext(t), "kept", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, value, cm.Data["value"], "the ConfigMap written before the rollout")
}

// logRestarts logs how each container in ns that restarted ended last, and
// when the controller's pod started, so that a restart can be told from
// the upgrade or not.
func logRestarts(t *testing.T, ns string) {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, k8s.List(testContext(t), pods, client.InNamespace("hosted-control-plane-system")))
	for _, p := range pods.Items {
		t.Logf("pod %s started %s", p.Name, p.Status.StartTime)
	}
	require.NoError(t, k8s.List(testContext(t), pods, client.InNamespace(ns)))
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if last := c.LastTerminationState.Terminated; last != nil {
				t.Logf("%s/%s restarted %d times; last ended %s (exit %d, %s): %s", p.Name, c.Name, c.RestartCount, last.FinishedAt, last.ExitCode, last.Reason, last.Message)
			}
		}
	}
}

// replaced checks that no pod of the control plane key in before runs any
// longer: each one's name is gone or carries another UID.
func replaced(t *testing.T, key client.ObjectKey, before map[string]string) error {
	t.Helper()
	now := hostedPods(t, key.Namespace)
	for name, was := range before {
		if !strings.HasPrefix(name, key.Name+"-") {
			continue
		}
		if now[name] != "" && strings.Fields(now[name])[0] == strings.Fields(was)[0] {
			return fmt.Errorf("pod %s not replaced (%s)", name, was)
		}
	}
	return nil
}

// clusterctlCLI runs clusterctl against the local management cluster with a
// configuration of its own.
type clusterctlCLI struct {
	bin, config, home, dist string
	// releases are the provider's releases in the repository, oldest first.
	releases []string
}

// newClusterctl writes clusterctl's configuration: the provider's releases
// from dist, and Cluster API's core provider, as the suite installed it,
// from a repository the test writes; and records the core provider in
// clusterctl's inventory.
func newClusterctl(t *testing.T, bin, dist string) *clusterctlCLI {
	t.Helper()
	require.NotEmpty(t, dist, "E2E_CLUSTERCTL_REPOSITORY")
	entries, err := os.ReadDir(filepath.Join(dist, providerDir))
	require.NoError(t, err)
	var releases []string
	for _, e := range entries {
		if _, err := semver.ParseTolerant(e.Name()); err == nil && e.IsDir() {
			releases = append(releases, e.Name())
		}
	}
	slices.SortFunc(releases, func(a, b string) int { return semver.MustParse(a[1:]).Compare(semver.MustParse(b[1:])) })
	require.GreaterOrEqual(t, len(releases), 2, "make release VERSION=... twice into %s", dist)

	capi, err := envtest.ModuleDir("sigs.k8s.io/cluster-api")
	require.NoError(t, err)
	core := filepath.Join(t.TempDir(), "cluster-api", images.CAPIVersion)
	require.NoError(t, os.MkdirAll(core, 0o755))
	components, err := provider.RenderClusterAPI(os.Getenv("KUSTOMIZE"), filepath.Join(capi, "core", "config"),
		"registry.k8s.io/cluster-api/cluster-api-controller:"+images.CAPIVersion)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(core, "core-components.yaml"), components, 0o644))
	metadata, err := os.ReadFile(filepath.Join(capi, "metadata.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(core, "metadata.yaml"), metadata, 0o644))

	inventory, err := os.ReadFile(filepath.Join(capi, "cmd", "clusterctl", "config", "manifest", "clusterctl-api.yaml"))
	require.NoError(t, err)
	require.NoError(t, cluster.Apply(testContext(t), k8s, inventory, ""))
	eventually(t, time.Minute, "clusterctl's inventory is served", func() error {
		return cluster.Apply(testContext(t), k8s, []byte(fmt.Sprintf(`apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Provider
metadata:
  name: cluster-api
  namespace: capi-system
  labels:
    clusterctl.cluster.x-k8s.io: ""
    clusterctl.cluster.x-k8s.io/core: inventory
    cluster.x-k8s.io/provider: cluster-api
providerName: cluster-api
type: CoreProvider
version: %s
`, images.CAPIVersion)), "")
	})

	// clusterctl labels what it installs; move finds the kinds to move by
	// that label on their CRDs.
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	require.NoError(t, k8s.List(testContext(t), crds, client.MatchingLabels{"cluster.x-k8s.io/provider": "cluster-api"}))
	require.NotEmpty(t, crds.Items)
	for i := range crds.Items {
		require.NoError(t, k8s.Patch(testContext(t), &crds.Items[i], client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"clusterctl.cluster.x-k8s.io":""}}}`))))
	}

	config := filepath.Join(t.TempDir(), "clusterctl.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`providers:
- name: cluster-api
  type: CoreProvider
  url: file://%s
- name: hosted-control-plane
  type: ControlPlaneProvider
  url: file://%s
`, filepath.Join(core, "core-components.yaml"), filepath.Join(dist, providerDir, releases[0], "control-plane-components.yaml"))), 0o600))
	return &clusterctlCLI{bin: bin, config: config, home: t.TempDir(), dist: dist, releases: releases}
}

// output runs clusterctl and returns what it printed.
func (c *clusterctlCLI) output(args ...string) (string, error) {
	cmd := exec.Command(c.bin, append(args, "--config", c.config, "--kubeconfig", mgmt.Kubeconfig, "-v", "1")...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+c.home, "HOME="+c.home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// run runs clusterctl, fails the test when it fails, and returns what it
// printed.
func (c *clusterctlCLI) run(t *testing.T, args ...string) string {
	t.Helper()
	start := time.Now()
	out, err := c.output(args...)
	t.Logf("clusterctl %s (%s):\n%s", strings.Join(args, " "), time.Since(start).Round(time.Second), out)
	require.NoError(t, err, "clusterctl %v", args)
	return out
}

// pinned is the image of name that release's bundle pins.
func (c *clusterctlCLI) pinned(t *testing.T, release, name string) string {
	t.Helper()
	bundle, err := os.ReadFile(filepath.Join(c.dist, providerDir, release, "control-plane-components.yaml"))
	require.NoError(t, err)
	ref := regexp.MustCompile(`ghcr\.io/hostedcp/cluster-api-provider-hosted-` + name + `@sha256:[0-9a-f]{64}`).Find(bundle)
	require.NotNil(t, ref, "release %s pins no %s image", release, name)
	return string(ref)
}

// controllerImage is the image the provider's controller runs.
func controllerImage(t *testing.T) string {
	t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(t, k8s.Get(testContext(t), client.ObjectKey{Namespace: "hosted-control-plane-system", Name: "hcp-controller"}, d))
	return d.Spec.Template.Spec.Containers[0].Image
}

// hostedPods is every pod in ns by name, with its UID and container
// restarts.
func hostedPods(t *testing.T, ns string) map[string]string {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, k8s.List(testContext(t), pods, client.InNamespace(ns)))
	out := map[string]string{}
	for _, p := range pods.Items {
		restarts := int32(0)
		for _, s := range p.Status.ContainerStatuses {
			restarts += s.RestartCount
		}
		out[p.Name] = fmt.Sprintf("%s restarts=%d", p.UID, restarts)
	}
	require.NotEmpty(t, out, "no pod in %s", ns)
	return out
}

// renderedBy checks that release has taken over every Deployment and
// StatefulSet of the control plane key: its rendering is applied, as their
// rendered-by annotation records, or, when held is true, held for the next
// rollout, as the control plane's status.rollout.pending lists it.
func renderedBy(t *testing.T, key client.ObjectKey, release string, held bool) error {
	t.Helper()
	ctx := testContext(t)
	hcp := &v1alpha1.HostedControlPlane{}
	if err := k8s.Get(ctx, key, hcp); err != nil {
		return err
	}
	pending := map[string]bool{}
	for _, p := range hcp.Status.Rollout.Pending {
		if !held {
			return fmt.Errorf("%s: %s pending", key, p.Object)
		}
		pending[p.Object] = strings.HasPrefix(p.RenderedBy, release+"+")
	}
	deployments, statefulSets := &appsv1.DeploymentList{}, &appsv1.StatefulSetList{}
	for _, list := range []client.ObjectList{deployments, statefulSets} {
		if err := k8s.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{"app.kubernetes.io/instance": key.Name}); err != nil {
			return err
		}
	}
	objs := map[string]client.Object{}
	for i := range deployments.Items {
		objs["Deployment "+deployments.Items[i].Name] = &deployments.Items[i]
	}
	for i := range statefulSets.Items {
		objs["StatefulSet "+statefulSets.Items[i].Name] = &statefulSets.Items[i]
	}
	if len(objs) == 0 {
		return fmt.Errorf("no workload of %s", key)
	}
	for name, o := range objs {
		if by := o.GetAnnotations()[rolloutstamp.RenderedByAnnotation]; !strings.HasPrefix(by, release+"+") && !pending[name] {
			return fmt.Errorf("%s rendered by %q, and no rendering of %s held", name, by, release)
		}
	}
	return nil
}
