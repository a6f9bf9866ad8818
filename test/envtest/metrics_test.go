package envtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
)

var (
	tokenOnce sync.Once
	token     string
	tokenErr  error
)

// metricsToken is a token of the metrics reader of config/prometheus.
func metricsToken(t testing.TB) string {
	t.Helper()
	tokenOnce.Do(func() { token, tokenErr = env.MetricsToken(testContext(t)) })
	require.NoError(t, tokenErr)
	return token
}

// scrapeController reads the shared controller's metrics as the PodMonitor
// of config/prometheus does.
func scrapeController(t testing.TB) string {
	t.Helper()
	code, body, err := Scrape(testContext(t), controller.MetricsURL, metricsToken(t))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
	return body
}

// families parses a scrape.
func families(t testing.TB, body string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	f, err := parser.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err)
	return f
}

// value is the value of the series of a family whose labels include want;
// false when there is none.
func value(f map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	for _, m := range f[name].GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && got[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// The metrics a platform team watches, read as its Prometheus reads them:
// only with the token of the metrics reader, and then with the facts of a
// control plane that runs (a real workload API server and a real etcd
// member at its pod's address) and of the extension. Every query of the
// Grafana dashboard and every alert of config/prometheus is then evaluated
// by Prometheus's own PromQL engine over two scrapes of both binaries
// (tools/metricscheck): none reads a metric or label value that is not
// there.
func TestMetricsDashboardAndAlerts(t *testing.T) {
	hosted(t)
	ctx := testContext(t)
	code, _, err := Scrape(ctx, controller.MetricsURL, "")
	require.NoError(t, err, controller.Output())
	assert.Equal(t, http.StatusUnauthorized, code, "no token, no metrics")
	ns := namespace(t)
	require.NoError(t, env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nosy"}}))
	nosy, err := env.Token(ctx, ns, "nosy")
	require.NoError(t, err)
	code, _, err = Scrape(ctx, controller.MetricsURL, nosy)
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, code, "a ServiceAccount not allowed /metrics reads none")

	const name = "metrics"
	cluster, hcp := servingControlPlane(t, name, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "0 0 1 1 *", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}
	})
	// No S3 server runs here: the test plays a snapshot taken two hours ago
	// in the status, from which the controller's backup metrics start, as
	// after a restart of the controller.
	setStatus(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Status.Etcd.LastBackupTime = &metav1.Time{Time: time.Now().Add(-2 * time.Hour)}
	})
	ns = hcp.Namespace
	setStatus(t, cluster, func(c *clusterv1.Cluster) { c.Status.Initialization.InfrastructureProvisioned = ptr.To(true) })
	waitCondition(t, hcp, v1alpha1.CoreDNSReadyCondition, metav1.ConditionTrue, v1alpha1.NoNodesReason)
	// A worker joins (the next pass comes with a touch, as with the status
	// of CoreDNS's pods), then someone deletes CoreDNS in the workload
	// cluster; the controller recreates it.
	w := workloadFor(t, ns, name)
	require.NoError(t, w.client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0"}}))
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, "example.com/node-joined", "worker-0")
	}))
	waitCondition(t, hcp, v1alpha1.CoreDNSReadyCondition, metav1.ConditionFalse, v1alpha1.ProgressingReason)
	dns := &appsv1.Deployment{}
	w.get(t, dns, "kube-system", components.CoreDNSName)
	require.NoError(t, w.client.Delete(ctx, dns))
	hasRepairEvent(t, hcp, "Deployment kube-system/"+components.CoreDNSName)

	ext := startSecureExtension(t)
	var f map[string]*dto.MetricFamily
	cp := map[string]string{"namespace": ns, "name": name}
	waitFor(t, "the control plane's facts in the metrics", func() error {
		f = families(t, scrapeController(t))
		if v, _ := value(f, "hostedcp_etcd_healthy_members", cp); v != 1 {
			return fmt.Errorf("hostedcp_etcd_healthy_members %v; EtcdReady %v", v, get(t, &v1alpha1.HostedControlPlane{}, ns, name).Status.Conditions)
		}
		return nil
	})
	avail := map[string]string{"namespace": ns, "name": name, "type": "Available", "status": "True", "reason": v1alpha1.ReadyReason}
	for _, c := range []struct {
		metric string
		labels map[string]string
		check  func(float64) bool
		what   string
	}{
		{"hostedcp_control_plane_condition", avail, func(v float64) bool { return v == 1 }, "Available, Ready"},
		{"hostedcp_control_plane_available_seconds", nil, func(v float64) bool { return v >= 1 }, "at least this one became Available"},
		{"hostedcp_api_requests_total", map[string]string{"target": "management"}, func(v float64) bool { return v > 0 }, "requests to the management cluster"},
		{"hostedcp_api_requests_total", map[string]string{"target": "workload"}, func(v float64) bool { return v > 0 }, "requests to a workload cluster"},
		{"hostedcp_addon_repairs_total", map[string]string{"phase": v1alpha1.CoreDNSReadyCondition, "action": "recreated"}, func(v float64) bool { return v >= 1 }, "CoreDNS recreated"},
		{"hostedcp_phase_duration_seconds", map[string]string{"side": "workload", "phase": v1alpha1.CoreDNSReadyCondition}, func(v float64) bool { return v >= 1 }, "CoreDNS phase timed"},
		{"hostedcp_etcd_members", cp, func(v float64) bool { return v == 1 }, "one voting member"},
		{"hostedcp_etcd_desired_members", cp, func(v float64) bool { return v == 1 }, "spec.etcd.replicas"},
		{"hostedcp_etcd_database_size_bytes", cp, func(v float64) bool { return v > 0 }, "etcd's database size"},
		{"hostedcp_etcd_database_quota_bytes", cp, func(v float64) bool { return v > 0 }, "etcd's quota"},
		{"hostedcp_certificate_expiry_seconds", cp, func(v float64) bool { return v > 0 }, "certificates not expired"},
		{"hostedcp_etcd_backup_newest_age_seconds", cp, func(v float64) bool { return v > 7000 && v < 8000 }, "the snapshot two hours old"},
		{"hostedcp_etcd_backup_interval_seconds", cp, func(v float64) bool { return v >= 365*24*3600 }, "a yearly schedule"},
	} {
		v, ok := value(f, c.metric, c.labels)
		assert.True(t, ok && c.check(v), "%s%v = %v (found: %v): %s", c.metric, c.labels, v, ok, c.what)
	}
	_, body, err := Scrape(ctx, ext.MetricsURL, metricsToken(t))
	require.NoError(t, err)
	_, ok := value(families(t, body), "hostedcp_upgrade_gate_decisions_total", map[string]string{"hook": "BeforeClusterUpgrade", "decision": "hold", "reason": "EtcdUnhealthy"})
	assert.True(t, ok, "the extension serves its gate decisions")

	checkDashboardAndAlerts(t, controller.MetricsURL, ext.MetricsURL)
}

// servingControlPlane is a control plane that serves: a real etcd as the
// first and only member of its StatefulSet, at its pod's address, where the
// controller reaches it, and a real API server at its endpoint, with the
// pods a kubelet would report; it waits until the control plane is
// Available. changes apply to the control plane before it is created.
func servingControlPlane(t testing.TB, name string, changes ...func(*v1alpha1.HostedControlPlane)) (*clusterv1.Cluster, *v1alpha1.HostedControlPlane) {
	t.Helper()
	podIP := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(254), 1+rand.IntN(254), 1+rand.IntN(254)) //nolint:gosec // not a secret
	port := freePort(t)
	cluster, hcp := readyControlPlane(t, name, "v1.35.2", append([]func(*v1alpha1.HostedControlPlane){func(h *v1alpha1.HostedControlPlane) {
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(port)}
		h.Spec.Etcd.Replicas = ptr.To[int32](1)
	}}, changes...)...)
	ns := hcp.Namespace
	db := runHostedEtcdAt(t, ns, name, podIP)
	db.startAPIServer(t, port, nil)
	member := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name + "-etcd-0", Labels: get(t, &appsv1.StatefulSet{}, ns, name+"-etcd").Spec.Template.Labels,
	}}
	member.Spec.Containers = []corev1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.8-0"}}
	require.NoError(t, env.Client.Create(testContext(t), member))
	setStatus(t, member, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP, p.Status.PodIPs = podIP, []corev1.PodIP{{IP: podIP}}
	})
	runningPod(t, hcp, name+"-apiserver-a", "v1.35.2")
	waitCondition(t, hcp, v1alpha1.AvailableCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	return cluster, hcp
}

// workloadFor is the workload cluster of a control plane, reached through the
// kubeconfig the controller wrote.
func workloadFor(t testing.TB, ns, name string) *workloadCluster {
	t.Helper()
	secret := get(t, &corev1.Secret{}, ns, name+"-kubeconfig")
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	require.NoError(t, err)
	w := &workloadCluster{config: cfg}
	w.client, err = client.New(cfg, client.Options{Scheme: Scheme()})
	require.NoError(t, err)
	return w
}

// startSecureExtension runs cmd/extension as its Deployment does, serving
// metrics over HTTPS to the metrics reader.
func startSecureExtension(t *testing.T) *Process {
	t.Helper()
	bin, err := Build(env.Root, "./cmd/extension", t.TempDir())
	require.NoError(t, err)
	p := []int{freePort(t), freePort(t), freePort(t)}
	proc, err := StartProcess(bin, []string{
		"KUBECONFIG=" + env.Kubeconfig, "WEBHOOK_CERT_DIR=" + env.WebhookCertDir(), "LOG_FORMAT=text",
		fmt.Sprintf("WEBHOOK_PORT=%d", p[0]), fmt.Sprintf("HEALTH_PROBE_BIND_ADDRESS=127.0.0.1:%d", p[1]),
		fmt.Sprintf("METRICS_BIND_ADDRESS=127.0.0.1:%d", p[2]),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = proc.Stop(5 * time.Second) })
	require.NoError(t, proc.WaitReady(fmt.Sprintf("http://127.0.0.1:%d/readyz", p[1]), time.Minute))
	require.NoError(t, proc.WaitListening(fmt.Sprintf("127.0.0.1:%d", p[2]), time.Minute))
	proc.MetricsURL = fmt.Sprintf("https://127.0.0.1:%d/metrics", p[2])
	return proc
}

// checkDashboardAndAlerts runs tools/metricscheck over urls: it scrapes
// them twice and evaluates every query of the dashboard and every rule with
// Prometheus's PromQL engine.
func checkDashboardAndAlerts(t *testing.T, urls ...string) {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(metricsToken(t)), 0o600))
	dir := filepath.Join(env.Root, "config", "prometheus")
	// The first run builds the checker and Prometheus's PromQL engine.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{
		"run", ".",
		"-token-file", tokenFile, "-rules", filepath.Join(dir, "prometheusrule.yaml"), "-dashboard", filepath.Join(dir, "dashboard.json"),
	},
		urls...)...)
	cmd.Dir = filepath.Join(env.Root, "tools", "metricscheck")
	out, err := cmd.CombinedOutput()
	t.Logf("metricscheck:\n%s", out)
	require.NoError(t, err, "every query of the dashboard and every alert reads metrics that exist")
}
