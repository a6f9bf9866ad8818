package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hostedcp/cluster-api-provider-hosted/test/pkitest"
)

func TestKubeadmFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kubeadm-flags.env")
	require.NoError(t, os.WriteFile(file, []byte(`KUBELET_KUBEADM_ARGS="--hostname-override=worker-1 --node-labels=a=b"`+"\n"), 0o600))
	flags, err := kubeadmFlags(file)
	require.NoError(t, err)
	assert.Equal(t, []string{"--hostname-override=worker-1", "--node-labels=a=b"}, flags)

	require.NoError(t, os.WriteFile(file, []byte("OTHER=1\n"), 0o600))
	_, err = kubeadmFlags(file)
	assert.ErrorContains(t, err, "no KUBELET_KUBEADM_ARGS")
}

func TestCACertHash(t *testing.T) {
	ca, err := pkitest.NewCA("test-ca")
	require.NoError(t, err)
	hash, err := CACertHash(ca.CertPEM())
	require.NoError(t, err)
	sum := sha256.Sum256(ca.Cert.RawSubjectPublicKeyInfo)
	assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), hash)
	_, err = CACertHash([]byte("not PEM"))
	assert.Error(t, err)
}

func TestWorkerAddresses(t *testing.T) {
	c := &Cluster{layout: layout{"/state"}, st: &state{}}
	cfg := WorkerConfig{Name: "w", Kubeadm: "k", Kubelet: "k", Endpoint: "e", Token: "t", CACertHash: "h", PodCIDR: "192.168.1.0/24"}
	for _, tc := range []struct {
		index        int
		host, node   string
		veth, failed string
	}{
		{index: 0, host: "10.252.0.1", node: "10.252.0.2", veth: "hcpw0"},
		{index: 2, host: "10.252.0.9", node: "10.252.0.10", veth: "hcpw2"},
		{index: 63, host: "10.252.0.253", node: "10.252.0.254", veth: "hcpw63"},
		{index: 64, failed: "want 0 to 63"},
	} {
		cfg.Index = tc.index
		w, err := c.newWorker(cfg)
		if tc.failed != "" {
			assert.ErrorContains(t, err, tc.failed)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.host, w.hostIP)
		assert.Equal(t, tc.node, w.NodeIP)
		assert.Equal(t, tc.veth, w.rec.HostVeth)
		assert.Equal(t, "hcpw-w", w.rec.Netns)
		assert.Equal(t, "/state/workers/w", w.Dir)
		assert.Equal(t, "hcp-e2e/w", w.cgroup())
	}
}

func TestIsKubelet(t *testing.T) {
	assert.True(t, isKubelet("kubelet"))
	assert.True(t, isKubelet("workers/w/kubelet"))
	assert.False(t, isKubelet("workers/w/kubeadm"))
	assert.False(t, isKubelet("kube-apiserver"))
}

// The worker's network and mount namespaces come up and go away again: the
// worker reaches the host over its veth pair, sees its own directories at
// /etc/kubernetes and the other bind targets (the host does not), and
// Stop, or the teardown of a worker whose process died, leaves no network
// namespace, interface, mount or created directory behind. It needs root
// and changes the host's network (an interface hcpw63, a route to
// 10.253.63.0/24), so it runs only with E2E=1, as the end-to-end tests; it starts
// containerd (when installed) and no other process, and touches no cgroup.
func TestWorkerNamespaces(t *testing.T) {
	if os.Getenv("E2E") != "1" {
		t.Skip("set E2E=1 (as root) to make a worker's namespaces")
	}
	for _, crashed := range []bool{false, true} {
		dir := t.TempDir()
		c := &Cluster{cfg: Config{Dir: dir}, layout: layout{dir}, st: &state{Dir: dir}}
		require.NoError(t, os.MkdirAll(c.layout.logs(), 0o700))
		w, err := c.newWorker(WorkerConfig{
			Name: "nstest", Index: 63, Kubeadm: "k", Kubelet: "k", Endpoint: "e", Token: "t", CACertHash: "h",
			PodCIDR: "10.253.63.0/24",
		})
		require.NoError(t, err)
		ctx := t.Context()
		require.NoError(t, w.makeDirs(ctx))
		require.NoError(t, w.setUpNetwork(ctx))
		require.NoError(t, w.makeMountNamespace(ctx))
		if _, err := exec.LookPath("containerd"); err == nil {
			// containerd runs in the worker's namespaces and the host
			// reaches its socket.
			require.NoError(t, w.startContainerd(ctx))
			_, err := ctrAt(ctx, w.socket(), "version")
			require.NoError(t, err)
		}

		require.NoError(t, os.WriteFile(w.path("etc-kubernetes", "marker"), []byte("worker"), 0o600))
		out, err := exec.Command("nsenter", w.inWorker("cat", "/etc/kubernetes/marker")...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Equal(t, "worker", string(out))
		_, err = os.Stat("/etc/kubernetes/marker")
		assert.True(t, os.IsNotExist(err), "the host does not see the worker's /etc/kubernetes")
		out, err = exec.Command("nsenter", w.inWorker("cat", "/etc/resolv.conf")...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "\nnameserver "+DNSAddress+"\n", "the worker asks the DNS of the Gateway's domain")
		hostResolvConf, err := os.ReadFile("/etc/resolv.conf")
		require.NoError(t, err)
		assert.NotContains(t, string(hostResolvConf), DNSAddress, "the host's resolv.conf is left alone")
		l, err := net.Listen("tcp", net.JoinHostPort(w.hostIP, "0"))
		require.NoError(t, err)
		port := l.Addr().(*net.TCPAddr).Port
		go func() {
			if conn, err := l.Accept(); err == nil {
				_ = conn.Close()
			}
		}()
		out, err = exec.Command("nsenter", w.inWorker("bash", "-c", fmt.Sprintf("echo > /dev/tcp/%s/%d", w.hostIP, port))...).CombinedOutput()
		require.NoError(t, err, "the worker reaches the host: %s", out)
		_ = l.Close()
		out, err = exec.Command("nsenter", w.inWorker("ip", "route", "show", "default")...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "via "+w.hostIP)
		out, err = exec.Command("nsenter", w.inWorker("cat", "/proc/self/mountinfo")...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.NotContains(t, string(out), " /run/netns/hcpw-nstest ", "the worker pins no network namespace file")

		if crashed {
			// What Teardown does for a worker, without killing the cluster's
			// cgroups or bridge.
			st, err := loadState(dir)
			require.NoError(t, err)
			require.Len(t, st.Workers, 1)
			require.NoError(t, killShims(dir))
			for _, p := range st.Processes {
				kill(dir, p.PID, 5*time.Second)
			}
			require.NoError(t, unmountUnder(dir))
			require.NoError(t, st.Workers[0].remove())
		} else {
			require.NoError(t, w.Stop())
			st, err := loadState(dir)
			require.NoError(t, err)
			assert.Empty(t, st.Workers)
		}
		_, err = os.Stat("/run/netns/hcpw-nstest")
		assert.True(t, os.IsNotExist(err), "network namespace removed")
		assert.Error(t, exec.Command("ip", "link", "show", "hcpw63").Run(), "host veth removed")
		mounts, err := os.ReadFile("/proc/self/mountinfo")
		require.NoError(t, err)
		assert.NotContains(t, string(mounts), dir, "no mount left under the cluster's directory")
		for _, d := range w.rec.CreatedDirs {
			_, err := os.Stat(d)
			assert.True(t, os.IsNotExist(err), "%s removed", d)
		}
		st, err := loadState(dir)
		require.NoError(t, err)
		for _, p := range st.Processes {
			assert.False(t, alive(p.PID), "%s (%d) ended", p.Name, p.PID)
		}
		routes, err := exec.Command("ip", "route").Output()
		require.NoError(t, err)
		assert.False(t, strings.Contains(string(routes), "10.253.63.0/24"), "route to the worker's pods removed")
	}
}
