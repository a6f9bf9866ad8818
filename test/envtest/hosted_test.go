package envtest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// runHostedAPIServer runs, as processes on 127.0.0.1, what a kubelet would run
// for a control plane: an etcd serving the etcd certificate cert-manager
// issued, and a kube-apiserver v1.36.3 with exactly the flags and mounted
// Secrets of the Deployment the controller rendered. Only addresses change:
// the pod IP and the etcd Service become 127.0.0.1, the secure port becomes
// port. The API server logs every write to the audit log whose path it
// returns.
func runHostedAPIServer(t *testing.T, ns, cluster string, port int) (auditLog string) {
	t.Helper()
	h := runHostedEtcd(t, ns, cluster)
	_, auditLog = h.startAPIServer(t, port, nil)
	return auditLog
}

// hostedEtcd is the etcd of a control plane, running as a process.
type hostedEtcd struct {
	ns, cluster string
	port        int
	// endpoints, when set, are the client URLs of several members, which
	// the API servers then use instead of 127.0.0.1:port.
	endpoints []string
}

// runHostedEtcd runs the etcd of a control plane on 127.0.0.1, serving the
// certificate cert-manager issued for it.
func runHostedEtcd(t *testing.T, ns, cluster string) *hostedEtcd {
	t.Helper()
	return runHostedEtcdAt(t, ns, cluster, "")
}

// runHostedEtcdAt runs the etcd of a control plane as runHostedEtcd does,
// and, when podIP is set, as the first member of its StatefulSet: named as
// its pod and serving also on the pod's address and etcd's client port,
// where the controller reaches its members.
func runHostedEtcdAt(t testing.TB, ns, cluster, podIP string) *hostedEtcd {
	t.Helper()
	bin := os.Getenv("KUBEBUILDER_ASSETS")
	dir := t.TempDir()
	etcdPort, peerPort := freePort(t), freePort(t)
	name, listen := "member", fmt.Sprintf("https://127.0.0.1:%d", etcdPort)
	if podIP != "" {
		name = cluster + "-etcd-0"
		listen += fmt.Sprintf(",https://%s:%d", podIP, contract.EtcdClientPort)
	}

	certs := filepath.Join(dir, "etcd-pki")
	writeSecretFiles(t, ns, cluster+"-etcd-server", certs)
	etcd, err := StartProcess(filepath.Join(bin, "etcd"), nil,
		"--name="+name, "--data-dir="+filepath.Join(dir, "etcd-data"),
		"--listen-client-urls="+listen,
		fmt.Sprintf("--advertise-client-urls=https://127.0.0.1:%d", etcdPort),
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", peerPort),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", peerPort),
		fmt.Sprintf("--initial-cluster=%s=http://127.0.0.1:%d", name, peerPort),
		"--listen-metrics-urls=http://127.0.0.1:0",
		"--client-cert-auth", "--trusted-ca-file="+certs+"/ca.crt",
		"--cert-file="+certs+"/tls.crt", "--key-file="+certs+"/tls.key")
	require.NoError(t, err)
	t.Cleanup(func() { _ = etcd.Stop(10 * time.Second) })
	return &hostedEtcd{ns: ns, cluster: cluster, port: etcdPort}
}

// startAPIServer runs the kube-apiserver of the rendered Deployment against
// the etcd, without the flags that drop says to leave out (playing an API
// server of an older release), on 127.0.0.1:port, and waits until it
// listens. It returns the process and the path of its audit log.
func (h *hostedEtcd) startAPIServer(t testing.TB, port int, drop func(arg string) bool) (*Process, string) {
	t.Helper()
	return h.startAPIServerIn(t, t.TempDir(), port, drop)
}

// startAPIServerIn is startAPIServer with the pod's files under dir.
func (h *hostedEtcd) startAPIServerIn(t testing.TB, dir string, port int, drop func(arg string) bool) (*Process, string) {
	t.Helper()
	return h.startAPIServerOf(t, dir, get(t, &appsv1.Deployment{}, h.ns, h.cluster+"-apiserver"), port, drop)
}

// startAPIServerOf is startAPIServerIn with the template of d, read before:
// the pods that show what runs are made of the same one (runPodsOf).
func (h *hostedEtcd) startAPIServerOf(t testing.TB, dir string, d *appsv1.Deployment, port int, drop func(arg string) bool) (*Process, string) {
	t.Helper()
	bin := os.Getenv("KUBEBUILDER_ASSETS")
	pod := d.Spec.Template.Spec
	var api corev1.Container
	for _, c := range pod.Containers {
		if c.Name == "kube-apiserver" {
			api = c
		}
	}
	var args []string
	for _, arg := range mountInto(t, h.ns, dir, pod.Volumes, api) {
		// The rendered etcd address is the Service's, which does not
		// resolve here; --etcd-servers below replaces it.
		if !strings.HasPrefix(arg, "--etcd-servers=") && (drop == nil || !drop(arg)) {
			args = append(args, arg)
		}
	}
	args = append(args,
		fmt.Sprintf("--secure-port=%d", port), "--bind-address=127.0.0.1",
		"--etcd-servers="+h.servers())
	audit, err := AuditFlags(dir)
	require.NoError(t, err)
	for name, value := range audit {
		args = append(args, "--"+name+"="+value)
	}
	apiserver, err := StartProcess(filepath.Join(bin, "kube-apiserver"), nil, args...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = apiserver.Stop(20 * time.Second) })
	// It starts in seconds on an idle machine and in a minute or more on a
	// busy one; a flag it refuses ends it at once.
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if exited, err := apiserver.Exited(); exited {
			t.Fatalf("the hosted API server exited (%v):\n%s", err, apiserver.Output())
		}
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hosted API server does not listen on %s:\n%s", addr, apiserver.Output())
		}
	}
	return apiserver, audit["audit-log-path"]
}

// waitAnswers waits until the API server cfg reaches answers /readyz: it
// listens before it serves, and on a busy machine a TLS handshake meanwhile
// may take longer than a client waits for it.
func waitAnswers(t testing.TB, cfg *rest.Config) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	waitFor(t, "the API server answers /readyz", func() error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(testContext(t))
		return err
	})
}

// servers is the API servers' --etcd-servers.
func (h *hostedEtcd) servers() string {
	if len(h.endpoints) > 0 {
		return strings.Join(h.endpoints, ",")
	}
	return fmt.Sprintf("https://127.0.0.1:%d", h.port)
}

// client is an etcd client with the API server's etcd client certificate.
func (h *hostedEtcd) client(t *testing.T) *clientv3.Client {
	t.Helper()
	secret := get(t, &corev1.Secret{}, h.ns, h.cluster+"-apiserver-etcd-client")
	cert, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(secret.Data["ca.crt"]))
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(h.servers(), ","),
		DialTimeout: 10 * time.Second,
		TLS:         &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, ServerName: contract.EtcdServerName(h.cluster, h.ns), MinVersion: tls.VersionTLS12},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// mountInto writes the Secrets a container mounts under dir and returns its
// arguments with mount paths moved there and the pod IP set to 127.0.0.1.
func mountInto(t testing.TB, ns, dir string, volumes []corev1.Volume, c corev1.Container) []string {
	t.Helper()
	secrets := secretMounts(dir, volumes, c)
	replace := []string{"$(POD_IP)", "127.0.0.1"}
	for _, m := range c.VolumeMounts {
		local := filepath.Join(dir, m.MountPath)
		if secret, ok := secrets[local]; ok {
			writeSecretFiles(t, ns, secret, local)
		} else {
			require.NoError(t, os.MkdirAll(local, 0o700))
		}
		replace = append(replace, m.MountPath+"/", local+"/")
	}
	r := strings.NewReplacer(replace...)
	args := make([]string, 0, len(c.Args))
	for _, a := range c.Args {
		args = append(args, r.Replace(a))
	}
	return args
}

// secretMounts are the directories under dir where mountInto writes the
// Secrets of c's mounts, and the Secret of each.
func secretMounts(dir string, volumes []corev1.Volume, c corev1.Container) map[string]string {
	secrets := map[string]string{}
	for _, v := range volumes {
		switch {
		case v.Secret != nil:
			secrets[v.Name] = v.Secret.SecretName
		case v.Projected != nil && len(v.Projected.Sources) == 1 && v.Projected.Sources[0].Secret != nil:
			secrets[v.Name] = v.Projected.Sources[0].Secret.Name
		}
	}
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		if secret, ok := secrets[m.Name]; ok {
			out[filepath.Join(dir, m.MountPath)] = secret
		}
	}
	return out
}

func freePort(t testing.TB) int {
	t.Helper()
	p, err := FreePort()
	require.NoError(t, err)
	return p
}
