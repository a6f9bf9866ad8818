package envtest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const leaseName = "hosted-control-plane-controller.controlplane.cluster.x-k8s.io"

// A second controller takes the leader lease, serves health and metrics, and
// on SIGTERM releases the lease and exits 0.
func TestControllerStartsAndStops(t *testing.T) {
	ns := namespace(t)
	p := []int{freePort(t), freePort(t)}
	bin, err := Build(env.Root, "./cmd/controller", t.TempDir())
	require.NoError(t, err)
	proc, err := StartProcess(bin, []string{
		"KUBECONFIG=" + env.Kubeconfig, "CONTROLLER_NAMESPACE=" + ns, "LEADER_ELECTION=true",
		"ENABLE_WEBHOOKS=false", "LOG_FORMAT=json", "LOG_LEVEL=debug",
		fmt.Sprintf("HEALTH_PROBE_BIND_ADDRESS=127.0.0.1:%d", p[0]),
	}, fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", p[1]))
	require.NoError(t, err)
	t.Cleanup(func() { _ = proc.Stop(5 * time.Second) })
	require.NoError(t, proc.WaitReady(fmt.Sprintf("http://127.0.0.1:%d/healthz", p[0]), time.Minute))
	require.NoError(t, proc.WaitReady(fmt.Sprintf("http://127.0.0.1:%d/metrics", p[1]), time.Minute))

	lease := &coordinationv1.Lease{}
	require.Eventually(t, func() bool {
		err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: leaseName}, lease)
		return err == nil && ptr.Deref(lease.Spec.HolderIdentity, "") != ""
	}, time.Minute, 200*time.Millisecond, "the controller takes the leader lease in CONTROLLER_NAMESPACE")

	require.NoError(t, proc.Stop(30*time.Second), "exit status 0 after SIGTERM")
	require.NoError(t, env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: leaseName}, lease))
	assert.Empty(t, ptr.Deref(lease.Spec.HolderIdentity, ""), "the lease is released for the next replica")
	assert.Contains(t, proc.Output(), `"msg":"controller stopped"`, "logs are JSON as LOG_FORMAT says")
}

// Bad configuration ends the process at once with status 2 and a message
// naming each bad setting.
func TestBinariesRejectBadConfiguration(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		pkg  string
		env  []string
		want []string
	}{
		{
			"./cmd/controller",
			[]string{"LOG_FORMAT=xml", "MAX_CONCURRENT_RECONCILES=0", "ENABLE_WEBHOOKS=false"},
			[]string{`LOG_FORMAT/--log-format "xml": use json or text`, "MAX_CONCURRENT_RECONCILES/--max-concurrent-reconciles 0: use 1 to 100"},
		},
		{
			"./cmd/controller",
			[]string{"LEADER_ELECTION=sometimes", "WEBHOOK_CERT_DIR=" + dir},
			[]string{`LEADER_ELECTION="sometimes": use true or false`, "has no tls.crt: mount the serving certificate there"},
		},
		{
			"./cmd/extension",
			[]string{"WEBHOOK_CERT_DIR=" + dir, "LOG_LEVEL=chatty"},
			[]string{"has no tls.key", `log level "chatty"`},
		},
	} {
		bin, err := Build(env.Root, tc.pkg, dir)
		require.NoError(t, err)
		cmd := exec.Command(bin)
		cmd.Env = append([]string{"KUBECONFIG=" + env.Kubeconfig}, tc.env...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%s must fail: %v\n%s", tc.pkg, err, out)
		assert.Equal(t, 2, exit.ExitCode())
		for _, want := range tc.want {
			assert.Contains(t, string(out), want)
		}
	}
}

// The extension serves Runtime SDK discovery over TLS and stops cleanly.
func TestExtensionServesDiscovery(t *testing.T) {
	p := []int{freePort(t), freePort(t)}
	bin, err := Build(env.Root, "./cmd/extension", t.TempDir())
	require.NoError(t, err)
	proc, err := StartProcess(bin, []string{
		"KUBECONFIG=" + env.Kubeconfig, "WEBHOOK_CERT_DIR=" + env.WebhookCertDir(), "LOG_FORMAT=text",
		fmt.Sprintf("WEBHOOK_PORT=%d", p[0]), fmt.Sprintf("HEALTH_PROBE_BIND_ADDRESS=127.0.0.1:%d", p[1]), "METRICS_BIND_ADDRESS=0",
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = proc.Stop(5 * time.Second) })
	require.NoError(t, proc.WaitReady(fmt.Sprintf("http://127.0.0.1:%d/readyz", p[1]), time.Minute))

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(env.WebhookCA()))
	https := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req := `{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"DiscoveryRequest"}`
	resp, err := https.Post(fmt.Sprintf("https://127.0.0.1:%d/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery", p[0]),
		"application/json", bytes.NewBufferString(req))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var discovery struct{ Status string }
	require.NoError(t, json.Unmarshal(body, &discovery))
	assert.Equal(t, "Success", discovery.Status, "%s", body)

	require.NoError(t, proc.Stop(30*time.Second), "exit status 0 after SIGTERM")
	assert.True(t, strings.Contains(proc.Output(), "extension stopped"))
}
