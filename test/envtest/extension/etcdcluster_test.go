package extension

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
	"github.com/hostedcp/cluster-api-provider-hosted/test/pkitest"
)

// etcdCluster is a real etcd cluster run from the kube binaries' etcd, one
// member per loopback address on a shared client port, published in the
// management cluster the way the controller publishes a hosted etcd: the
// client Service's EndpointSlice and the health-check client certificate
// Secret. Its serving certificate names only <cluster>-etcd.<ns>.svc, like
// the controller's, so a client that dials members by address must verify
// that name to get in. Peers talk plain HTTP: peer TLS is not what these
// tests are about.
type etcdCluster struct {
	t                     testing.TB
	cluster, namespace    string
	ca                    *pkitest.KeyPair
	serverCert, serverKey []byte
	clientCert, clientKey []byte
	dir                   string
	ips                   []string
	clientPort, peerPort  int
	// members run on their own address each; nil: not running.
	members []*envtest.Process
	// initial and state are the --initial-cluster (by index) and
	// --initial-cluster-state a member starts with.
	initial []int
	state   string
	// quota is the members' --quota-backend-bytes; 100MiB when zero.
	quota int64
	// maxLearners is the members' --max-learners; etcd.MaxLearners, as the
	// controller renders it, when zero.
	maxLearners int
}

// etcdMembers is the size of the test etcd clusters the extension checks:
// the smallest that keeps a quorum with a member down.
const etcdMembers = 3

// maxMembers is the most members a test cluster grows to.
const maxMembers = 5

func startEtcd(t testing.TB, cluster, namespace string) *etcdCluster {
	t.Helper()
	return startEtcdOf(t, cluster, namespace, etcdMembers, etcdMembers)
}

// startEtcdOf starts a new cluster of n members with addresses for room
// members in all.
func startEtcdOf(t testing.TB, cluster, namespace string, n, room int) *etcdCluster {
	t.Helper()
	c := newEtcdCluster(t, cluster, namespace, n, room)
	for i := range n {
		c.start(i)
	}
	c.waitHealthy()
	return c
}

// newEtcdCluster is a cluster of n members with addresses for room members
// in all, none of them started yet.
func newEtcdCluster(t testing.TB, cluster, namespace string, n, room int) *etcdCluster {
	t.Helper()
	c := &etcdCluster{t: t, cluster: cluster, namespace: namespace, ca: newCA(t, "etcd-ca"), dir: t.TempDir(), state: "new"}
	// A serving certificate is a client one too: etcd's gateway dials itself with it.
	c.serverCert, c.serverKey = issue(t, c.ca, "etcd", contract.EtcdServerName(cluster, namespace))
	c.clientCert, c.clientKey = issue(t, c.ca, "healthcheck")
	for name, data := range map[string][]byte{"ca.crt": c.ca.CertPEM(), "server.crt": c.serverCert, "server.key": c.serverKey} {
		require.NoError(t, os.WriteFile(filepath.Join(c.dir, name), data, 0o600))
	}
	c.ips, c.clientPort = freeLoopbackAddresses(t, room)
	c.peerPort = c.clientPort + 1
	c.members = make([]*envtest.Process, room)
	for i := range n {
		c.initial = append(c.initial, i)
	}
	t.Cleanup(func() {
		for i := range c.members {
			c.stop(i)
		}
	})
	return c
}

// freeLoopbackAddresses picks n addresses 127.x.y.1..n, random to keep
// clear of other tests on this machine, and a port whose number and the
// next are free on all of them.
func freeLoopbackAddresses(t testing.TB, n int) ([]string, int) {
	t.Helper()
	for range 50 {
		prefix := fmt.Sprintf("127.%d.%d.", 1+rand.IntN(254), 1+rand.IntN(254)) //nolint:gosec // not a secret
		port := 20000 + 2*rand.IntN(10000)                                      //nolint:gosec // not a secret
		ips := make([]string, n)
		free := true
		for i := range ips {
			ips[i] = prefix + strconv.Itoa(i+1)
			free = free && portFree(ips[i], port) && portFree(ips[i], port+1)
		}
		if free {
			return ips, port
		}
	}
	t.Fatal("no free loopback addresses")
	return nil, 0
}

func portFree(ip string, port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func (c *etcdCluster) memberName(i int) string { return fmt.Sprintf("member-%d", i) }

func (c *etcdCluster) endpoint(i int) string {
	return net.JoinHostPort(c.ips[i], strconv.Itoa(c.clientPort))
}

func (c *etcdCluster) peerURL(i int) string {
	return "http://" + net.JoinHostPort(c.ips[i], strconv.Itoa(c.peerPort))
}

// initialCluster is the --initial-cluster members start with.
func (c *etcdCluster) initialCluster() string {
	var initial []string
	for _, j := range c.initial {
		initial = append(initial, c.memberName(j)+"="+c.peerURL(j))
	}
	return strings.Join(initial, ",")
}

// dataDir is member i's --data-dir.
func (c *etcdCluster) dataDir(i int) string { return filepath.Join(c.dir, c.memberName(i)) }

// start starts member i, or restarts it on its data.
func (c *etcdCluster) start(i int) {
	c.t.Helper()
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "etcd")
	p, err := envtest.StartProcess(bin, nil,
		"--name="+c.memberName(i), "--data-dir="+c.dataDir(i),
		"--listen-client-urls=https://"+c.endpoint(i), "--advertise-client-urls=https://"+c.endpoint(i),
		"--listen-peer-urls="+c.peerURL(i), "--initial-advertise-peer-urls="+c.peerURL(i),
		"--initial-cluster="+c.initialCluster(), "--initial-cluster-state="+c.state, "--initial-cluster-token="+c.cluster,
		"--cert-file="+filepath.Join(c.dir, "server.crt"), "--key-file="+filepath.Join(c.dir, "server.key"),
		"--trusted-ca-file="+filepath.Join(c.dir, "ca.crt"), "--client-cert-auth",
		"--quota-backend-bytes="+strconv.FormatInt(cmp.Or(c.quota, 100<<20), 10), "--heartbeat-interval=200", "--election-timeout=2000",
		"--max-learners="+strconv.Itoa(cmp.Or(c.maxLearners, etcd.MaxLearners)),
		"--log-level=warn", "--unsafe-no-fsync")
	require.NoError(c.t, err)
	c.members[i] = p
}

// join starts member i, added to the cluster before, as a member of the
// existing cluster whose members are members (i among them), as a
// StatefulSet starts the pod of a new member.
func (c *etcdCluster) join(i int, members []int) {
	c.t.Helper()
	c.initial, c.state = members, "existing"
	c.start(i)
}

// remove stops member i and deletes its data, as the StatefulSet deletes
// the pod and volume of a removed member.
func (c *etcdCluster) remove(i int) {
	c.t.Helper()
	c.stop(i)
	require.NoError(c.t, os.RemoveAll(c.dataDir(i)))
}

// stop stops member i; its data stays for a restart.
func (c *etcdCluster) stop(i int) {
	if p := c.members[i]; p != nil {
		_ = p.Stop(10 * time.Second)
		c.members[i] = nil
	}
}

// client is an etcd client to member i, trusting the cluster's CA for the
// Service's name, as the extension does.
func (c *etcdCluster) client(i int) *clientv3.Client {
	c.t.Helper()
	cert, err := tls.X509KeyPair(c.clientCert, c.clientKey)
	require.NoError(c.t, err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(c.ca.CertPEM())
	// Named by the certificate's DNS name (gRPC verifies the endpoint's
	// host), dialled at the member's address.
	name := net.JoinHostPort(contract.EtcdServerName(c.cluster, c.namespace), strconv.Itoa(c.clientPort))
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{"https://" + name}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", c.endpoint(i))
		})},
	})
	require.NoError(c.t, err)
	c.t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// waitHealthy waits until every running member answers and knows a leader.
func (c *etcdCluster) waitHealthy() {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for i, p := range c.members {
		if p == nil {
			continue
		}
		cli := c.client(i)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Status(ctx, &pb.StatusRequest{})
			cancel()
			if err == nil && resp.Leader != 0 {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("etcd %s is not healthy: %v\n%s", c.memberName(i), err, p.Output())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// setAlarm raises (or, with raise false, disarms) a NOSPACE alarm on member i.
func (c *etcdCluster) setAlarm(i int, raise bool) {
	c.t.Helper()
	cli := c.client(i)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Status(ctx, &pb.StatusRequest{})
	require.NoError(c.t, err)
	action := pb.AlarmRequest_ACTIVATE
	if !raise {
		action = pb.AlarmRequest_DEACTIVATE
	}
	_, err = pb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx, &pb.AlarmRequest{
		Action: action, MemberID: status.Header.MemberId, Alarm: pb.AlarmType_NOSPACE,
	})
	require.NoError(c.t, err)
}

// publish creates what the controller keeps for a hosted etcd: the client
// Service, its EndpointSlice with every member's address on the port named
// "client", and the health-check client certificate Secret.
func (c *etcdCluster) publish() {
	c.t.Helper()
	ctx := testContext(c.t)
	name := contract.EtcdName(c.cluster)
	require.NoError(c.t, k8s.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{
			{Name: contract.EtcdClientPortName, Port: contract.EtcdClientPort},
		}},
	}))
	// The API server refuses loopback IPs in IPv4 slices; an FQDN slice
	// takes the same dotted addresses, and the extension dials whatever
	// address a slice holds.
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: c.namespace, Name: name + "-members", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeFQDN,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(contract.EtcdClientPortName), Port: ptr.To(int32(c.clientPort))}},
	}
	for _, ip := range c.ips {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	require.NoError(c.t, k8s.Create(ctx, slice))
	require.NoError(c.t, k8s.Create(ctx, c.secret(c.clientCert, c.clientKey, c.ca.CertPEM())))
}

func (c *etcdCluster) secret(cert, key, ca []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: contract.EtcdHealthcheckSecretName(c.cluster)},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key, "ca.crt": ca},
	}
}
