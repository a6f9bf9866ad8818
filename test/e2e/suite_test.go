package e2e

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/local"
)

var (
	// root is the repository.
	root string
	// mgmt is the local management cluster every test shares.
	mgmt *cluster.Cluster
	// k8s is its admin client.
	k8s client.Client
	// clientset is the same for logs.
	clientset *kubernetes.Clientset
)

// TestMain brings up the local management cluster with the provider
// installed, runs the tests and tears everything down. The tests run only
// with E2E=1 (make test-e2e sets it), as they need root, containerd, runc and
// the CNI plugins. With E2E_CLUSTERCTL set (make test-clusterctl) the
// provider is left out and TestClusterctl runs alone: it installs the
// provider with clusterctl.
//
// Each test works in namespaces of its own. One that touches what every
// other relies on (the controller's pod, which
// TestControllerKilledWhileProvisioning kills) runs alone, first; the rest
// call parallel and then run beside each other, as many at once as the
// suite has slots, the longest first (see longestFirst). Those that rely on
// the shared Gateway staying in place never run beside
// TestGatewaySharedByTwoClusters, which deletes it and creates it again
// (sharedGateway).
func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("E2E") != "1" {
		fmt.Println("skipping the end-to-end tests: run them with make test-e2e")
		return 0
	}
	// The tests' clients log only the API's deprecation warnings; without
	// a logger controller-runtime prints a stack trace instead.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if root, err = envtest.RepoRoot(); err != nil {
		fmt.Println(err)
		return 1
	}
	dir := os.Getenv("E2E_DIR")
	if dir == "" {
		dir = cluster.DefaultDir
	}
	start := time.Now()
	cfg, err := local.ClusterConfig(ctx, root, dir, os.Stdout)
	if err != nil {
		fmt.Println("build images:", err)
		return 1
	}
	fmt.Printf("e2e: images ready in %s\n", time.Since(start).Round(time.Second))
	if mgmt, err = cluster.Start(ctx, cfg); err != nil {
		fmt.Println("start the local management cluster:", err)
		return 1
	}
	defer func() {
		if err := mgmt.Stop(); err != nil {
			fmt.Println("tear down:", err)
		}
	}()
	k8s = mgmt.Client
	if clientset, err = kubernetes.NewForConfig(mgmt.REST); err != nil {
		fmt.Println(err)
		return 1
	}
	start = time.Now()
	if err := local.Install(ctx, root, k8s, clusterctlRun()); err != nil {
		fmt.Println(err)
		dumpPods(ctx, os.Stdout)
		return 1
	}
	fmt.Printf("e2e: provider installed in %s\n", time.Since(start).Round(time.Second))
	if clusterctlRun() {
		// The provider is TestClusterctl's to install, upgrade and delete:
		// no other test can run beside it.
		flag.Parse()
		if err := flag.Set("test.run", "^TestClusterctl$"); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	return m.Run()
}

// testContext ends with the test.
func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// namespace makes a namespace for one test; on failure it prints what the
// controller said and the state of the namespace's pods.
func namespace(t testing.TB, name string) string {
	t.Helper()
	ctx := testContext(t)
	require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	t.Cleanup(func() {
		if t.Failed() {
			ctx := context.Background()
			dumpControlPlanes(ctx, t, name)
			dumpPods(ctx, t.Output())
			w := failureLog(t, name)
			defer w.Close()
			dumpEvents(ctx, w, name)
			dumpLogs(ctx, w, "hosted-control-plane-system", "app.kubernetes.io/name=hosted-control-plane-controller", name, 200)
			dumpLogs(ctx, w, "capi-system", "cluster.x-k8s.io/provider=cluster-api", name, 100)
		}
	})
	return name
}

// failureLog is a file beside the local cluster's logs for what a failed
// test would otherwise print at length: the test's output keeps to a few
// lines, so that its assertion's message stays among its last lines (those
// CI shows) rather than above hundreds of events and log lines.
func failureLog(t testing.TB, name string) io.WriteCloser {
	dir := filepath.Join(mgmt.LogDir(), "failures")
	path := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+"-"+name+".log")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("failure log: %v", err)
		return nopCloser{t.Output()}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Logf("failure log: %v", err)
		return nopCloser{t.Output()}
	}
	t.Logf("events and logs of %s: %s", name, path)
	return f
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func dumpControlPlanes(ctx context.Context, t testing.TB, ns string) {
	classes, clusters, hcps := &clusterv1.ClusterClassList{}, &clusterv1.ClusterList{}, &v1alpha1.HostedControlPlaneList{}
	for _, list := range []client.ObjectList{classes, clusters, hcps} {
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Log(err)
		}
	}
	for _, c := range classes.Items {
		t.Logf("ClusterClass %s:%s", c.Name, local.FormatConditions(c.Status.Conditions))
	}
	for _, c := range clusters.Items {
		t.Logf("Cluster %s:%s", c.Name, local.FormatConditions(c.Status.Conditions))
	}
	for _, h := range hcps.Items {
		t.Logf("HostedControlPlane %s: version %s, versions %v%s", h.Name, h.Spec.Version, h.Status.Versions, local.FormatConditions(h.Status.Conditions))
	}
}

// dumpPods prints every pod that is not ready, with its container states.
func dumpPods(ctx context.Context, w io.Writer) {
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods); err != nil {
		_, _ = fmt.Fprintln(w, err)
		return
	}
	for _, p := range pods.Items {
		if podReady(&p) {
			continue
		}
		_, _ = fmt.Fprintf(w, "pod %s/%s on %q %s%s\n", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, containerStates(p.Status.ContainerStatuses))
	}
}

// dumpEvents prints the events of the namespace's objects other than pods,
// oldest first: cert-manager's say why a certificate was issued, ours what a
// phase waited for.
func dumpEvents(ctx context.Context, w io.Writer, ns string) {
	events, err := clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		_, _ = fmt.Fprintln(w, err)
		return
	}
	items := events.Items
	sort.SliceStable(items, func(i, j int) bool { return items[i].LastTimestamp.Before(&items[j].LastTimestamp) })
	for _, e := range items {
		if e.InvolvedObject.Kind == "Pod" {
			continue
		}
		_, _ = fmt.Fprintf(w, "event %s %s %s/%s x%d %s: %s\n", e.LastTimestamp.Format(time.TimeOnly), e.Type,
			e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Count, e.Reason, e.Message)
	}
}

// dumpLogs writes, of each pod's log, the lines that name the test's
// namespace (what the controllers did for its clusters, however long ago
// and whatever else they did since) and then the last lines.
func dumpLogs(ctx context.Context, w io.Writer, ns, selector, testNamespace string, lines int64) {
	pods, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		_, _ = fmt.Fprintln(w, err)
		return
	}
	for _, p := range pods.Items {
		b, err := clientset.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		all := strings.Split(strings.TrimSpace(string(b)), "\n")
		_, _ = fmt.Fprintf(w, "--- logs of %s/%s naming %s (%v)\n", ns, p.Name, testNamespace, err)
		for _, line := range all {
			if strings.Contains(line, testNamespace) {
				_, _ = fmt.Fprintln(w, line)
			}
		}
		_, _ = fmt.Fprintf(w, "--- last %d lines of %s/%s\n%s\n", lines, ns, p.Name, strings.Join(all[max(0, len(all)-int(lines)):], "\n"))
	}
}

// containerStates is a line's worth of each container's readiness, restarts
// and state.
func containerStates(statuses []corev1.ContainerStatus) string {
	var b strings.Builder
	for _, s := range statuses {
		state := "running"
		switch {
		case s.State.Waiting != nil:
			state = "waiting " + s.State.Waiting.Reason + " " + s.State.Waiting.Message
		case s.State.Terminated != nil:
			state = fmt.Sprintf("terminated %s exit %d", s.State.Terminated.Reason, s.State.Terminated.ExitCode)
		}
		fmt.Fprintf(&b, "; %s ready=%v restarts=%d %s", s.Name, s.Ready, s.RestartCount, strings.TrimSpace(state))
	}
	return b.String()
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// eventually polls check until it returns nil; when time is up it fails the
// test with check's last error.
func eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	if err := cluster.Poll(context.Background(), timeout, time.Second, func(context.Context) error { return check() }, nil); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// apply applies a YAML stream into ns.
func apply(t testing.TB, ns, yaml string) {
	t.Helper()
	require.NoError(t, cluster.Apply(testContext(t), k8s, []byte(yaml), ns))
}

// hostedConfig is the client configuration of the admin kubeconfig the
// provider wrote for a Cluster, as a user on the host uses it: names of the
// Gateway's domain resolve as the machine's DNS would publish them.
func hostedConfig(t testing.TB, ns, clusterName string) *rest.Config {
	t.Helper()
	cfg, err := kubeconfigOf(testContext(t), client.ObjectKey{Namespace: ns, Name: clusterName})
	require.NoError(t, err)
	return cfg
}

// kubeconfigOf is hostedConfig of the Cluster at key, as the kubeconfig
// holds it now.
func kubeconfigOf(ctx context.Context, key client.ObjectKey) (*rest.Config, error) {
	kubeconfig, err := local.Kubeconfig(ctx, k8s, key)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Dial = cluster.DialContext
	return cfg, nil
}

// controlPlaneOf is the HostedControlPlane of a Cluster.
func controlPlaneOf(t *testing.T, ns, clusterName string) *v1alpha1.HostedControlPlane {
	t.Helper()
	var hcp *v1alpha1.HostedControlPlane
	eventually(t, 2*time.Minute, "the Cluster's HostedControlPlane exists", func() error {
		list := &v1alpha1.HostedControlPlaneList{}
		if err := k8s.List(testContext(t), list, client.InNamespace(ns), client.MatchingLabels{"cluster.x-k8s.io/cluster-name": clusterName}); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d HostedControlPlanes of Cluster %s", len(list.Items), clusterName)
		}
		hcp = &list.Items[0]
		return nil
	})
	return hcp
}

// imageVersion is the tag of an image reference.
func imageVersion(image string) string { return image[strings.LastIndex(image, ":")+1:] }
