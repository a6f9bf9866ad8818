package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
)

// rotationClients use the workload cluster while its certificates and keys
// rotate, and count what fails: from the host through <cluster>-kubeconfig
// a reader (a new connection per request) and a writer, an informer that
// watches what the writer writes, and a pod on the worker that reads
// through the kubernetes Service with its service account token (the
// probe's --every).
type rotationClients struct {
	stopReader func() ([]string, int64)
	// done stops the writer, stopInformer the informer once it has seen
	// the last write.
	done, stopInformer chan struct{}
	stopped            sync.Once
	wg                 sync.WaitGroup
	writes             atomic.Int64
	mu                 sync.Mutex
	failed             []string
	watchErrs          []string
	resumed            []string
	seen               string
	written            string
}

// rotationConfigMap is what the writer writes and the informer watches.
const rotationConfigMap = "rotation"

func startRotationClients(t *testing.T, cfg *rest.Config, hosted kubernetes.Interface) *rotationClients {
	t.Helper()
	ctx := testContext(t)
	c := &rotationClients{done: make(chan struct{}), stopInformer: make(chan struct{})}
	_, err := hosted.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: rotationConfigMap}, Data: map[string]string{"n": "0"},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = nil // written by the clients of a step before
	}
	require.NoError(t, err)

	informer := cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(hosted.CoreV1().RESTClient(), "configmaps", "default", fields.OneTermEqualSelector("metadata.name", rotationConfigMap)),
		&corev1.ConfigMap{}, 0, cache.Indexers{})
	// A watch that ends is resumed from its last resourceVersion, after a
	// connection error too; only an expired resourceVersion makes the
	// informer list everything again, which is what a client must never
	// have to do across a rotation.
	require.NoError(t, informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		said := time.Now().Format(time.StampMilli) + ": " + err.Error()
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			c.watchErrs = append(c.watchErrs, said)
		} else {
			c.resumed = append(c.resumed, said)
		}
	}))
	seen := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.seen = cm.Data["n"]
		}
	}
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }})
	require.NoError(t, err)
	go informer.Run(c.stopInformer)
	t.Cleanup(c.stopInformerOnce)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.HasSynced), "the informer syncs")

	c.wg.Go(func() {
		for n := 1; ; n++ {
			select {
			case <-c.done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			value := strconv.Itoa(n)
			_, err := hosted.CoreV1().ConfigMaps("default").Update(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: rotationConfigMap}, Data: map[string]string{"n": value},
			}, metav1.UpdateOptions{})
			c.writes.Add(1)
			c.mu.Lock()
			if err != nil {
				c.failed = append(c.failed, time.Now().Format(time.StampMilli)+": write: "+err.Error())
			} else {
				c.written = value
			}
			c.mu.Unlock()
		}
	})
	c.stopReader = pollInBackground(t, cfg)
	return c
}

func (c *rotationClients) stopInformerOnce() { c.stopped.Do(func() { close(c.stopInformer) }) }

// stop ends the clients and checks that nothing failed and that the
// informer follows to the last write.
func (c *rotationClients) stop(t *testing.T) {
	t.Helper()
	c.stopListing(t, nil)
}

// stopListing is stop, where a failed write that listed takes is logged
// rather than counted.
func (c *rotationClients) stopListing(t *testing.T, listed func(failure string) bool) {
	t.Helper()
	reads, requests := c.stopReader()
	close(c.done)
	c.wg.Wait()
	c.mu.Lock()
	t.Logf("from the host: %d reads, %d writes; watch errors the informer resumed from: %v", requests, c.writes.Load(), c.resumed)
	failed := slices.DeleteFunc(slices.Clone(c.failed), func(f string) bool { return listed != nil && listed(f) })
	if n := len(c.failed) - len(failed); n > 0 {
		t.Logf("%d writes failed as listed, not counted: %v", n, c.failed)
	}
	assert.Empty(t, reads, "reads that failed from the host")
	assert.Empty(t, failed, "writes that failed from the host")
	assert.Empty(t, c.watchErrs, "watch errors the informer had to list everything again for")
	c.mu.Unlock()
	assert.Greater(t, c.writes.Load(), int64(50), "the writer wrote throughout")
	caughtUp := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.seen == c.written
	}
	for deadline := time.Now().Add(2 * time.Minute); !caughtUp() && time.Now().Before(deadline); {
		time.Sleep(time.Second)
	}
	c.mu.Lock()
	assert.Equal(t, c.written, c.seen, "the informer follows to the last write")
	c.mu.Unlock()
	c.stopInformerOnce()
}

// pollInBackground is pollAPIServer until the returned stop is called.
func pollInBackground(t *testing.T, cfg *rest.Config) (stop func() ([]string, int64)) {
	started, end := make(chan struct{}), make(chan struct{})
	var failures []string
	var requests int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		failures, requests = pollAPIServer(t, cfg, func() {
			close(started)
			<-end
		})
	}()
	<-started
	return func() ([]string, int64) {
		close(end)
		<-done
		return failures, requests
	}
}

// probeCount is what the probe's --every reports: the last running count
// and each failure.
var probeCount = regexp.MustCompile(`probe: (\d+) requests, (\d+) failed`)

func countedByProbe(t *testing.T, hosted kubernetes.Interface, pod string) (requests, failed int, failures []string) {
	t.Helper()
	var logs string
	eventually(t, 2*time.Minute, "the logs of "+pod, func() error {
		b, err := hosted.CoreV1().Pods("default").GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(testContext(t))
		logs = string(b)
		return err
	})
	counts := probeCount.FindAllStringSubmatch(logs, -1)
	require.NotEmpty(t, counts, "a count in the log of %s:\n%s", pod, logs)
	last := counts[len(counts)-1]
	requests, _ = strconv.Atoi(last[1])
	failed, _ = strconv.Atoi(last[2])
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.HasPrefix(line, "probe: failed") {
			failures = append(failures, line)
		}
	}
	return requests, failed, failures
}

// renewCertificates asks cert-manager to issue certificates again now, as
// `cmctl renew` does, and waits until each Secret holds a new one.
func renewCertificates(t *testing.T, ns string, names ...string) {
	t.Helper()
	ctx := testContext(t)
	before := map[string]string{}
	for _, name := range names {
		before[name] = secretSerial(t, ns, name)
		crt := &cmv1.Certificate{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, crt))
		crt.Status.Conditions = append(crt.Status.Conditions, cmv1.CertificateCondition{
			Type: cmv1.CertificateConditionIssuing, Status: cmmeta.ConditionTrue, Reason: "ManuallyTriggered",
			Message: "renewed by the test", ObservedGeneration: crt.Generation, LastTransitionTime: &metav1.Time{Time: time.Now()},
		})
		require.NoError(t, k8s.Status().Update(ctx, crt), name)
	}
	eventually(t, 2*time.Minute, fmt.Sprintf("%d certificates issued again", len(names)), func() error {
		var pending []string
		for _, name := range names {
			if secretSerial(t, ns, name) == before[name] {
				pending = append(pending, name)
			}
		}
		if len(pending) > 0 {
			return fmt.Errorf("not yet: %v", pending)
		}
		return nil
	})
}

// secretSerial is the serial number of the certificate in a Secret.
func secretSerial(t *testing.T, ns, name string) string {
	t.Helper()
	serial, err := issuedSerial(testContext(t), ns, name)
	require.NoError(t, err)
	return serial
}

// issuedSerial is the serial number of the certificate a Secret holds now.
// A renewal can issue twice in a moment (cert-manager asks again when the
// Secret's key no longer matches its request), so what a component must
// present is the Secret's latest certificate, read at the time.
func issuedSerial(ctx context.Context, ns, name string) (string, error) {
	s := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		return "", err
	}
	cert, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return "", fmt.Errorf("Secret %s: %w", name, err)
	}
	return cert.Leaf.SerialNumber.String(), nil
}

// leafCertificates are the control plane's certificates that are no
// authority and no service account key, but for those named in except.
func leafCertificates(t *testing.T, ns, clusterName string, except ...string) []string {
	t.Helper()
	list := &cmv1.CertificateList{}
	require.NoError(t, k8s.List(testContext(t), list, client.InNamespace(ns), client.MatchingLabels{"cluster.x-k8s.io/cluster-name": clusterName}))
	var names []string
	for _, c := range list.Items {
		if !c.Spec.IsCA && c.Name != clusterName+"-sa" && !slices.Contains(except, c.Name) {
			names = append(names, c.Name)
		}
	}
	slices.Sort(names)
	return names
}

// servedSerial is the serial number of the certificate a TLS server
// presents through dial.
func servedSerial(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) (string, error) {
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	// The name routes a connection through the Gateway (SNI).
	host, _, _ := net.SplitHostPort(addr)
	tc := tls.Client(conn, &tls.Config{ServerName: host, InsecureSkipVerify: true}) //nolint:gosec // only the presented certificate is read
	defer func() { _ = tc.Close() }()
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	// etcd asks for a client certificate, and refuses the handshake
	// without one; the server's certificate has arrived by then.
	err = tc.HandshakeContext(ctx)
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		return certs[0].SerialNumber.String(), nil
	}
	return "", fmt.Errorf("no certificate from %s: %w", addr, err)
}

// podSerial is the serial number of the certificate a pod of the
// management cluster presents on port, reached by port forwarding (so no
// network policy is in the way).
func podSerial(ctx context.Context, ns, pod string, port int) (string, error) {
	var serial string
	err := forwarded(ctx, ns, pod, port, func(addr string) (err error) {
		serial, err = servedSerial(ctx, (&net.Dialer{}).DialContext, addr)
		return err
	})
	return serial, err
}

// forwarded calls use with a local address forwarded to port of a pod of
// the management cluster, until it returns.
func forwarded(ctx context.Context, ns, pod string, port int, use func(addr string) error) error {
	transport, upgrader, err := spdy.RoundTripperFor(mgmt.REST)
	if err != nil {
		return err
	}
	u, err := url.Parse(mgmt.REST.Host + "/api/v1/namespaces/" + ns + "/pods/" + pod + "/portforward")
	if err != nil {
		return err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return err
	}
	failed := make(chan error, 1)
	go func() { failed <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-failed:
		return fmt.Errorf("port-forward to %s: %w", pod, err)
	case <-ctx.Done():
		return ctx.Err()
	}
	ports, err := pf.GetPorts()
	if err != nil {
		return err
	}
	return use("127.0.0.1:" + strconv.Itoa(int(ports[0].Local)))
}

// apiServerSerial is the serial number of the certificate the API server
// presents at the kubeconfig's server.
func apiServerSerial(ctx context.Context, cfg *rest.Config) (string, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return "", err
	}
	return servedSerial(ctx, cluster.DialContext, u.Host)
}

// managementPods are the UIDs and restart counts of a namespace's pods.
func managementPods(t *testing.T, ns string) map[types.UID]string {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, k8s.List(testContext(t), pods, client.InNamespace(ns)))
	out := map[types.UID]string{}
	for _, p := range pods.Items {
		var restarts int32
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		out[p.UID] = fmt.Sprintf("%s restarted %d times", p.Name, restarts)
	}
	return out
}

// leavesRenewedWithoutFailures renews every leaf certificate of a Cluster
// with a joined worker while rotationClients count failures: first every
// one that its process reads again, which the API server and etcd then
// present with no pod replaced or restarted, then the konnectivity
// server's, which rolls the API servers. Nothing fails, the worker stays
// Ready and joined, <cluster>-kubeconfig holds the renewed admin
// certificate, and kubectl exec reaches the pod again.
func leavesRenewedWithoutFailures(t *testing.T, cfg *rest.Config, hosted kubernetes.Interface, key client.ObjectKey, nodeName string) {
	ctx := testContext(t)
	ns, name := key.Namespace, key.Name
	createProbe(t, hosted, nodeName, "counter", "--every=100ms", "--url=https://kubernetes.default.svc/api/v1/namespaces/default/pods?limit=1")
	node, err := hosted.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	require.NoError(t, err)
	clients := startRotationClients(t, cfg, hosted)
	start := time.Now()

	pods := managementPods(t, ns)
	konnectivity := name + "-konnectivity-server"
	renewCertificates(t, ns, leafCertificates(t, ns, name, konnectivity)...)
	eventually(t, 5*time.Minute, "the API server and etcd present their renewed certificates", func() error {
		got, err := apiServerSerial(ctx, cfg)
		if err != nil {
			return fmt.Errorf("the API server's certificate: %w", err)
		}
		apiServer, err := issuedSerial(ctx, ns, name+"-apiserver")
		if err != nil {
			return err
		}
		if got != apiServer {
			return fmt.Errorf("the API server presents %s, its Secret holds %s", got, apiServer)
		}
		etcdServer, err := issuedSerial(ctx, ns, name+"-etcd-server")
		if err != nil {
			return err
		}
		etcdPods := &corev1.PodList{}
		if err := k8s.List(ctx, etcdPods, client.InNamespace(ns), client.MatchingLabels{contract.ComponentLabel: contract.EtcdComponent, contract.InstanceLabel: name}); err != nil {
			return err
		}
		for _, p := range etcdPods.Items {
			got, err := podSerial(ctx, ns, p.Name, 2379)
			if err != nil {
				return fmt.Errorf("etcd %s's certificate: %w", p.Name, err)
			}
			if got != etcdServer {
				return fmt.Errorf("etcd %s presents %s, its Secret holds %s", p.Name, got, etcdServer)
			}
		}
		return nil
	})
	reloaded := time.Since(start)
	assert.Equal(t, pods, managementPods(t, ns), "no pod of the control plane replaced or restarted for certificates it reads again")
	eventually(t, time.Minute, "<cluster>-kubeconfig holds the renewed admin certificate", func() error {
		secret := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-kubeconfig"}, secret); err != nil {
			return err
		}
		kc, err := clientcmd.Load(secret.Data["value"])
		if err != nil {
			return err
		}
		cert, err := tls.X509KeyPair(kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo].ClientCertificateData, kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo].ClientKeyData)
		if err != nil {
			return err
		}
		admin, err := issuedSerial(ctx, ns, name+"-admin")
		if err != nil {
			return err
		}
		if got := cert.Leaf.SerialNumber.String(); got != admin {
			return fmt.Errorf("its client certificate is %s, the admin Secret's %s", got, admin)
		}
		return nil
	})

	renewCertificates(t, ns, konnectivity)
	eventually(t, 5*time.Minute, "the API servers rolled for the konnectivity server's certificate", func() error {
		hcp := &v1alpha1.HostedControlPlane{}
		if err := k8s.Get(ctx, key, hcp); err != nil {
			return err
		}
		for _, c := range hcp.Status.Conditions {
			if c.Type == v1alpha1.APIServerReadyCondition && c.Status == metav1.ConditionTrue {
				for uid, pod := range pods {
					if strings.HasPrefix(pod, name+"-apiserver-") {
						if _, left := managementPods(t, ns)[uid]; left {
							return fmt.Errorf("%s is still there", pod)
						}
					}
				}
				return nil
			}
		}
		return errors.New("APIServerReady is not true")
	})
	total := time.Since(start)
	t.Logf("BENCH rotation_leaves_reloaded_s %.3f s", reloaded.Seconds())
	t.Logf("BENCH rotation_leaves_s %.3f s", total.Seconds())
	// The probe reports its count every 5s.
	time.Sleep(6 * time.Second)
	clients.stop(t)
	requests, failed, failures := countedByProbe(t, hosted, "counter")
	t.Logf("from the pod on the worker: %d requests, %d failed", requests, failed)
	if retried := tunnelRetries(t, hosted, nodeName); len(retried) > 0 {
		t.Logf("the tunnel on the node opened %d connections only after failed attempts (their requests waited, none failed):\n%s",
			len(retried), strings.Join(retried, "\n"))
	}
	assert.Zero(t, failed, "requests that failed from the pod: %v", failures)
	assert.Greater(t, requests, 100, "the pod read throughout")

	after, err := hosted.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, node.UID, after.UID, "the node was never registered again")
	require.NoError(t, cluster.NodeReady(after))
	eventually(t, 2*time.Minute, "kubectl exec reaches the pod through konnectivity", func() error {
		stdout, stderr, err := execIn(ctx, cfg, hosted, "probe", "/probe", "--version")
		if err != nil {
			return fmt.Errorf("exec: %w (stderr %q)", err, stderr)
		}
		if strings.TrimSpace(stdout) != "probe dev" {
			return fmt.Errorf("exec printed %q", stdout)
		}
		return nil
	})
}

// tunnelRetries are the lines of the log of the tunnel on node (kas-tunnel,
// which runs in gateway mode and for an endpoint that is a name) that say
// it opened a connection only after failed attempts. What it cannot read it
// says, and the test goes on: it is an observation, not an assertion.
func tunnelRetries(t *testing.T, hosted kubernetes.Interface, node string) []string {
	t.Helper()
	ctx := testContext(t)
	pods, err := hosted.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{
		LabelSelector: "k8s-app=kas-tunnel", FieldSelector: "spec.nodeName=" + node,
	})
	if err != nil {
		t.Logf("the tunnel's pods on %s: %v", node, err)
		return nil
	}
	var retried []string
	for _, p := range pods.Items {
		b, err := hosted.CoreV1().Pods("kube-system").GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Logf("the log of %s: %v", p.Name, err)
			continue
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.Contains(line, "connected after failed attempts") {
				retried = append(retried, line)
			}
		}
	}
	return retried
}
