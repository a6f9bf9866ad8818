package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/controller"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/settings"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/webhooks"
	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
)

var env *envtest.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if env, err = envtest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	stop, err := envtest.StartCertManager(context.Background(), env.Kubeconfig, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = stop() }()
	return m.Run()
}

// report prints a figure for `make bench` to collect.
func report(name string, value float64, unit string) {
	fmt.Printf("BENCH %s %.3f %s\n", name, value, unit)
}

// createControlPlane creates a Cluster and its control plane, served at an
// address where nothing answers (so passes include a failing probe) unless
// a change says otherwise.
func createControlPlane(ctx context.Context, c client.Client, ns, name string, changes ...func(*v1alpha1.HostedControlPlane)) (*v1alpha1.HostedControlPlane, error) {
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	cluster.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
	cluster.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "HostedControlPlane", Name: name}
	if err := c.Create(ctx, cluster); err != nil {
		return nil, err
	}
	hcp := &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: name, UID: cluster.UID}},
	}}
	hcp.Spec.Version = "v1.36.3"
	hcp.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureClusterIP}
	hcp.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 1}
	for _, change := range changes {
		change(hcp)
	}
	return hcp, c.Create(ctx, hcp)
}

// playWorkloads rolls out whatever workloads of a control plane exist yet,
// as the workload controllers would; missing ones are skipped.
func playWorkloads(ctx context.Context, c client.Client, hcp *v1alpha1.HostedControlPlane) {
	key := func(suffix string) client.ObjectKey {
		return client.ObjectKey{Namespace: hcp.Namespace, Name: hcp.Name + suffix}
	}
	_ = envtest.RollOutStatefulSet(ctx, c, key("-etcd"))
	for _, d := range []string{"-apiserver", "-controller-manager", "-scheduler"} {
		_ = envtest.RollOutDeployment(ctx, c, key(d))
	}
}

func namespace(ctx context.Context, b *testing.B) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		b.Fatal(err)
	}
	return ns.Name
}

// BenchmarkReconcile drives one control plane through an in-process
// Reconciler and times its passes: the passes that bring a new control plane
// from nothing to every object applied (waiting for cert-manager happens
// between passes, so it is excluded), then passes over it unchanged.
func BenchmarkReconcile(b *testing.B) {
	ctx := context.Background()
	kubeconfig, err := env.UserKubeconfig("bench-reconciler")
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	// The manager serves the admission webhooks and runs the cache; the
	// Reconciler is called directly, never by a controller of the manager.
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: envtest.Scheme(), Cache: controller.CacheOptions(controller.Shard{}), Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: env.WebhookPort(), CertDir: env.WebhookCertDir()}),
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := (webhooks.HostedControlPlane{}).SetupWithManager(mgr); err != nil {
		b.Fatal(err)
	}
	clusters, err := controller.SetupClusterCache(ctx, mgr, mgr.GetClient(), controller.Shard{}, 1, settings.DefaultWorkloadHealthProbeInterval)
	if err != nil {
		b.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = mgr.Start(mctx) }()
	mgr.GetCache().WaitForCacheSync(mctx)
	for mgr.GetWebhookServer().StartedChecker()(nil) != nil {
		time.Sleep(50 * time.Millisecond)
	}
	r := controller.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), render.DefaultSettings(), nil,
		mgr.GetEventRecorder("bench"), controller.ReadyzProber{Timeout: time.Second}, clusters)

	ns := namespace(ctx, b)
	hcp, err := createControlPlane(ctx, env.Client, ns, "bench")
	if err != nil {
		b.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hcp)}
	var applying time.Duration
	deadline := time.Now().Add(2 * time.Minute)
	for {
		start := time.Now()
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
		applying += time.Since(start)
		if err := env.Client.Get(ctx, req.NamespacedName, hcp); err != nil {
			b.Fatal(err)
		}
		if conditions.IsTrue(hcp, v1alpha1.ControllersReadyCondition) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("control plane not ready: %v", hcp.Status.Conditions)
		}
		playWorkloads(ctx, env.Client, hcp)
		time.Sleep(50 * time.Millisecond) // let the cache see what was written
	}
	report("apply_first_ms", float64(applying.Microseconds())/1000, "ms")

	time.Sleep(time.Second)
	const passes = 50
	since := time.Now()
	durations := make([]time.Duration, passes)
	for i := range durations {
		start := time.Now()
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
		durations[i] = time.Since(start)
	}
	writes, err := env.Writes("bench-reconciler", since)
	if err != nil {
		b.Fatal(err)
	}
	report("reconcile_noop_ms", float64(median(durations).Microseconds())/1000, "ms")
	report("writes_per_noop_reconcile", float64(len(writes))/passes, "writes")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
