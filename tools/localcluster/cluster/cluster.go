package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
	"github.com/hostedcp/cluster-api-provider-hosted/test/pkitest"
)

// The cluster's networks and ports. One local cluster runs on a machine at a
// time; Start refuses to run beside a live one.
const (
	// NodeName is the name of the cluster's only node.
	NodeName = "management"
	// NodeIP is the host's address on the pod bridge: the node's address, where
	// pods reach the API server and the kubelet.
	NodeIP = "10.244.0.1"
	// PodCIDR holds every pod address.
	PodCIDR = "10.244.0.0/16"
	// ServiceCIDR holds every ClusterIP.
	ServiceCIDR = "10.96.0.0/16"
	// APIServiceIP is the address of the kubernetes Service, the API
	// server's in the cluster.
	APIServiceIP = "10.96.0.1"
	// DNSServiceIP is the address of the kube-dns Service CoreDNS serves.
	DNSServiceIP = "10.96.0.10"
	// LoadBalancerCIDR is where LoadBalancer Services get their addresses.
	LoadBalancerCIDR = "10.250.0.0/24"
	// GatewayDomain is the wildcard domain of the management cluster's
	// Gateway: every name under it resolves to GatewayAddress (see dns.go),
	// except those under LoadBalancerDomain.
	GatewayDomain = "hcp.test"
	// LoadBalancerDomain holds the hostnames the LoadBalancer Services of
	// a Namespace with LoadBalancerHostnamesLabel report: the name
	// <a>-<b>-<c>-<d>.LoadBalancerDomain resolves to a.b.c.d, through the
	// same DNS as GatewayDomain.
	LoadBalancerDomain = "lb." + GatewayDomain
	// GatewayAddress is the LoadBalancer address reserved for the Gateway
	// implementation's Service, as a platform team reserves one and points
	// a wildcard DNS record at it.
	GatewayAddress = "10.250.0.250"
	// DNSAddress is the LoadBalancer address of the DNS server that
	// machines outside the cluster ask (the host, worker nodes): it answers
	// for GatewayDomain only.
	DNSAddress = "10.250.0.53"
	// ExternalAddress is an address of the host outside every network of
	// the cluster, where the tests run what a platform keeps outside its
	// management cluster (the S3 store): pods reach it as they reach the
	// world, not at the node's address, where the management API server
	// answers and which hosted pods' policies leave out.
	ExternalAddress = "10.243.0.1"
	// APIServerPort is the management API server's port on every host address.
	APIServerPort = 16443

	bridgeName     = "hcp0"
	etcdClientPort = 12379
	etcdPeerPort   = 12380
	// cgroupParent holds every pod's cgroup, in every hierarchy.
	cgroupParent = "hcp-e2e"
)

// DefaultDir keeps a cluster's state outside the repository, so that tools
// walking the tree never descend into container filesystems.
const DefaultDir = "/var/lib/hostedcp-e2e"

// Binaries are the host programs the cluster runs.
type Binaries struct {
	Etcd, APIServer, ControllerManager, Scheduler, Kubelet, KubeProxy string
}

// Images are the references of the images the cluster's own pods run; their
// tarballs are in Config.Images.
type Images struct {
	Pause, KubeProxy, KubeRouter, CoreDNS string
}

// Config says what a cluster runs.
type Config struct {
	// Dir holds the cluster's state, logs and kubeconfig (DefaultDir if empty).
	Dir      string
	Binaries Binaries
	Images   Images
	// Tarballs are OCI image tarballs imported into containerd before the
	// kubelet starts.
	Tarballs []string
	// Log receives progress lines (nil drops them).
	Log io.Writer `json:"-"`
}

// Cluster is a running local cluster.
type Cluster struct {
	cfg    Config
	layout layout
	st     *state
	// Kubeconfig is the path of an admin kubeconfig for the host.
	Kubeconfig string
	// Client is an admin client.
	Client client.Client
	// REST is the admin client configuration.
	REST *rest.Config

	cancel    context.CancelFunc
	loopsDone chan struct{}
}

// layout is where a cluster keeps its files.
type layout struct{ dir string }

func (l layout) path(parts ...string) string {
	return filepath.Join(append([]string{l.dir}, parts...)...)
}
func (l layout) pki(name string) string   { return l.path("pki", name) }
func (l layout) logs() string             { return l.path("logs") }
func (l layout) containerdSocket() string { return l.path("containerd", "containerd.sock") }
func (l layout) kubeconfig(name string) string {
	return l.path("kubeconfigs", name+".kubeconfig")
}

// Start brings a cluster up: it first removes what a previous cluster in the
// same directory left behind, then starts every part and waits until the node
// is Ready and CoreDNS and kube-proxy run. On failure it tears down what it
// started.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if err := CheckNoOtherCluster(cfg.Dir); err != nil {
		return nil, err
	}
	if err := Teardown(cfg.Dir, cfg.Binaries.KubeProxy); err != nil {
		return nil, fmt.Errorf("remove the previous cluster in %s: %w", cfg.Dir, err)
	}
	c := &Cluster{cfg: cfg, layout: layout{cfg.Dir}, st: &state{Dir: cfg.Dir, Supervisor: os.Getpid()}}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	if err := c.runSteps(ctx, "", []step{
		{"directories", c.makeDirs},
		{"certificates and kubeconfigs", c.writePKI},
		{"network", c.setUpNetwork},
		{"etcd", c.startEtcd},
		{"kube-apiserver", c.startAPIServer},
		{"kube-controller-manager and kube-scheduler", c.startControllers},
		{"containerd", c.startContainerd},
		{"images", c.importImages},
		{"kubelet", c.startKubelet},
		{"add-ons", c.startAddons},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// step is one part of bringing a cluster or worker up.
type step struct {
	what string
	run  func(context.Context) error
}

// runSteps runs steps in order, logging how long each took after prefix and
// naming the one that failed.
func (c *Cluster) runSteps(ctx context.Context, prefix string, steps []step) error {
	for _, s := range steps {
		start := time.Now()
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("%s%s: %w", prefix, s.what, err)
		}
		c.logf("%s%s: ready in %s", prefix, s.what, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func (c *Cluster) logf(format string, args ...any) {
	_, _ = fmt.Fprintf(c.cfg.Log, "local cluster: "+format+"\n", args...)
}

// Dir is where the cluster keeps its state and logs.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// LogDir holds one log file per process.
func (c *Cluster) LogDir() string { return c.layout.logs() }

// Stop ends the cluster's own loops and tears everything down.
func (c *Cluster) Stop() error {
	if c.cancel != nil {
		c.cancel()
		<-c.loopsDone
	}
	return Teardown(c.cfg.Dir, c.cfg.Binaries.KubeProxy)
}

func (c *Cluster) makeDirs(context.Context) error {
	for _, d := range []string{"pki", "logs", "kubeconfigs", "etcd", "cni", "kubelet", "containerd", "volumes"} {
		if err := os.MkdirAll(c.layout.path(d), 0o700); err != nil {
			return err
		}
	}
	// Pods write to their host-path volumes as non-root users.
	return os.Chmod(c.layout.path("volumes"), 0o755)
}

// writePKI issues the cluster's certificates and writes a kubeconfig for each
// client.
func (c *Cluster) writePKI(context.Context) error {
	ca, err := pkitest.NewCA("local-management-ca")
	if err != nil {
		return err
	}
	sa, err := pkitest.NewCA("service-accounts")
	if err != nil {
		return err
	}
	dir := c.layout.path("pki")
	if err := ca.Write(dir, "ca"); err != nil {
		return err
	}
	if err := sa.Write(dir, "sa"); err != nil {
		return err
	}
	if err := sa.WritePublicKey(dir, "sa"); err != nil {
		return err
	}
	serving, err := ca.Issue("kube-apiserver", nil, NodeIP, "127.0.0.1", APIServiceIP, "localhost",
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	if err != nil {
		return err
	}
	if err := serving.Write(dir, "apiserver"); err != nil {
		return err
	}
	clients := []struct {
		name, user string
		groups     []string
	}{
		{"admin", "kubernetes-admin", []string{"system:masters"}},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}},
		{"controller-manager", "system:kube-controller-manager", nil},
		{"scheduler", "system:kube-scheduler", nil},
		{"kubelet", "system:node:" + NodeName, []string{"system:nodes"}},
	}
	for _, cl := range clients {
		kp, err := ca.Issue(cl.user, cl.groups)
		if err != nil {
			return err
		}
		if err := kp.Write(dir, cl.name); err != nil {
			return err
		}
		if err := c.writeKubeconfig(cl.name, kp); err != nil {
			return err
		}
	}
	c.Kubeconfig = c.layout.path("kubeconfig")
	admin, err := os.ReadFile(c.layout.kubeconfig("admin"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.Kubeconfig, admin, 0o600); err != nil {
		return err
	}
	c.REST, c.Client, err = connect(c.Kubeconfig)
	return err
}

// Connect returns an admin client of the cluster running in dir.
func Connect(dir string) (client.Client, error) {
	_, c, err := connect(layout{dir}.path("kubeconfig"))
	return c, err
}

func connect(kubeconfig string) (*rest.Config, client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	// No client-side rate limit: every test of a suite shares this client,
	// and client-go's default (5 requests a second per resource) queued
	// their polls behind each other, so a test watching a rollout every
	// 500ms could miss a step of it. The API server's priority and fairness
	// still protects it.
	cfg.QPS = -1
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	return cfg, c, err
}

func (c *Cluster) writeKubeconfig(name string, kp *pkitest.KeyPair) error {
	key, err := kp.KeyPEM()
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(c.layout.pki("ca.crt"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{
		Server:                   "https://" + net.JoinHostPort(NodeIP, fmt.Sprint(APIServerPort)),
		CertificateAuthorityData: ca,
	}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM(), ClientKeyData: key}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, c.layout.kubeconfig(name))
}

// Scheme knows the kinds of Kubernetes, CRDs, Cluster API, cert-manager,
// Gateway API and this provider.
func Scheme() *runtime.Scheme {
	s := envtest.Scheme()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}
