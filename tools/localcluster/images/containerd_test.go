package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every image imports into a containerd of its own and the ones run here
// start: their binary reports its version (or usage) from inside the
// container. It builds whatever is missing first, so it runs only with
// E2E=1; there, a missing containerd fails it.
func TestImagesRunInContainerd(t *testing.T) {
	if os.Getenv("E2E") != "1" {
		t.Skip("set E2E=1 to build every image and run it in a scratch containerd")
	}
	for _, tool := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (apt-get install containerd runc): %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	start := time.Now()
	list, err := Ensure(ctx, root, testWriter{t})
	require.NoError(t, err)
	t.Logf("built or found %d images in %s", len(list), time.Since(start).Round(time.Second))

	ctr := startContainerd(t)
	for _, img := range list {
		out, err := ctr(ctx, "images", "import", "--all-platforms", img.Tar)
		require.NoError(t, err, "import %s: %s", img.Ref, out)
	}
	out, err := ctr(ctx, "images", "list", "-q")
	require.NoError(t, err)
	for _, img := range list {
		assert.Contains(t, strings.Fields(out), img.Ref)
	}

	for i, run := range []struct {
		ref  string
		args []string
		want string
	}{
		{"registry.k8s.io/kube-apiserver:" + KubeVersion, []string{"kube-apiserver", "--version"}, "Kubernetes " + KubeVersion},
		{"registry.k8s.io/kube-apiserver:" + PreviousKubeVersion, []string{"kube-apiserver", "--version"}, "Kubernetes " + PreviousKubeVersion},
		{"registry.k8s.io/kube-controller-manager:" + KubeVersion, []string{"kube-controller-manager", "--version"}, "Kubernetes " + KubeVersion},
		{"registry.k8s.io/kube-scheduler:" + PreviousKubeVersion, []string{"kube-scheduler", "--version"}, "Kubernetes " + PreviousKubeVersion},
		{"registry.k8s.io/kube-proxy:" + KubeVersion, []string{"kube-proxy", "--version"}, "Kubernetes " + KubeVersion},
		{"registry.k8s.io/kube-proxy:" + KubeVersion, []string{"iptables", "--version"}, "nf_tables"},
		{"registry.k8s.io/kube-proxy:" + KubeVersion, []string{"ip6tables-save", "--version"}, "nf_tables"},
		{"registry.k8s.io/kube-proxy:" + KubeVersion, []string{"conntrack", "--version"}, "conntrack"},
		{"registry.k8s.io/etcd:" + EtcdTag, []string{"etcd", "--version"}, "etcd Version: " + strings.TrimPrefix(EtcdVersion, "v")},
		{"registry.k8s.io/coredns/coredns:" + CoreDNSVersion, []string{"/coredns", "-version"}, "CoreDNS-" + strings.TrimPrefix(CoreDNSVersion, "v")},
		{"registry.k8s.io/kas-network-proxy/proxy-server:" + KonnectivityVersion, []string{"/proxy-server", "--help"}, "--cluster-cert"},
		{"registry.k8s.io/kas-network-proxy/proxy-agent:" + KonnectivityVersion, []string{"/proxy-agent", "--help"}, "--proxy-server-host"},
		{"registry.k8s.io/pause:" + PauseVersion, []string{"/pause", "-v"}, "pause.c " + PauseVersion},
		{"docker.io/library/traefik:" + TraefikVersion, []string{"/traefik", "version"}, TraefikVersion},
		{"registry.k8s.io/cluster-api/cluster-api-controller:" + CAPIVersion, []string{"/manager", "--help"}, "--feature-gates"},
		{"hostedcp.test/cert-manager:" + CertManagerVersion, []string{"/cert-manager", "--help"}, "-leader-elect"},
		{"ghcr.io/hostedcp/cluster-api-provider-hosted-controller:" + DevTag, []string{"/controller", "--help"}, ""},
		{"ghcr.io/hostedcp/cluster-api-provider-hosted-extension:" + DevTag, []string{"/extension", "--help"}, ""},
		{"ghcr.io/hostedcp/cluster-api-provider-hosted-tunnel:" + DevTag, []string{"/tunnel", "--help"}, "usage: tunnel server|node"},
		{"ghcr.io/hostedcp/cluster-api-provider-hosted-etcd-restore:" + DevTag, []string{"/etcd-restore", "--help"}, "etcd's --initial-cluster-token"},
		{ProbeImage, []string{"/probe", "--version"}, "probe dev"},
	} {
		args := append([]string{"run", "--rm", "--net-host", run.ref, fmt.Sprintf("images-test-%d", i)}, run.args...)
		out, err := ctr(ctx, args...)
		// --help exits 0 or 2 by the flag library; a binary that does not start exits otherwise.
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 2 && run.args[len(run.args)-1] == "--help" {
			err = nil
		}
		if assert.NoError(t, err, "%s %v: %s", run.ref, run.args, out) {
			assert.Contains(t, out, run.want, "%s %v", run.ref, run.args)
			t.Logf("%s %v: %s", run.ref, run.args, firstLine(out, run.want))
		}
	}
}

// startContainerd runs a containerd with its own root, state and socket
// under a temporary directory, configured as the local cluster's are, and
// returns a function that runs ctr against it in the k8s.io namespace. The
// cleanup kills it by process id and removes its directories.
func startContainerd(t *testing.T) func(ctx context.Context, args ...string) (string, error) {
	// Short: the socket path must fit in a sockaddr.
	dir, err := os.MkdirTemp("", "ctrd-")
	require.NoError(t, err)
	def, err := exec.Command("containerd", "config", "default").Output()
	require.NoError(t, err)
	config := string(def)
	for old, new := range map[string]string{
		`sandbox_image = "registry.k8s.io/pause:3.6"`: `sandbox_image = "registry.k8s.io/pause:` + PauseVersion + `"`,
		`bin_dir = "/opt/cni/bin"`:                    `bin_dir = "/usr/lib/cni"`,
		`conf_dir = "/etc/cni/net.d"`:                 `conf_dir = "` + filepath.Join(dir, "cni") + `"`,
		`restrict_oom_score_adj = false`:              `restrict_oom_score_adj = true`,
	} {
		require.Contains(t, config, old)
		config = strings.Replace(config, old, new, 1)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o600))
	sock := filepath.Join(dir, "containerd.sock")
	logFile, err := os.Create(filepath.Join(dir, "containerd.log"))
	require.NoError(t, err)
	cmd := exec.Command("containerd", "--config", filepath.Join(dir, "config.toml"),
		"--root", filepath.Join(dir, "root"), "--state", filepath.Join(dir, "state"), "--address", sock)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			if log, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("containerd log (tail):\n%s", tail(string(log), 40))
			}
		}
		// The state directory holds mounts only while containers run; all
		// were removed with --rm.
		assert.NoError(t, os.RemoveAll(dir))
	})
	ctr := func(ctx context.Context, args ...string) (string, error) {
		var out bytes.Buffer
		c := exec.CommandContext(ctx, "ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...)
		c.Stdout, c.Stderr = &out, &out
		err := c.Run()
		return out.String(), err
	}
	require.Eventually(t, func() bool {
		_, err := ctr(context.Background(), "version")
		return err == nil
	}, 30*time.Second, 200*time.Millisecond, "containerd did not answer on %s", sock)
	return ctr
}

// firstLine is the line of out that contains want, or its first line.
func firstLine(out, want string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, want) {
			return strings.TrimSpace(line)
		}
	}
	return strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// testWriter logs each write of the build to the test.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
