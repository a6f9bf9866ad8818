package components

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/apply"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenCase is a representative control plane and where it is served. There
// is one per exposure type: gateway, LoadBalancer, ClusterIP and NodePort.
type goldenCase struct {
	name     string
	cp       func(*v1alpha1.HostedControlPlane)
	cluster  func(*clusterv1.Cluster)
	listener *contract.GatewayListener
	endpoint clusterv1.APIEndpoint
	// konnectivityPort is what the controller read from the exposure Service
	// when it is not the konnectivity server's own port: a node port.
	konnectivityPort int32
}

var goldenCases = []goldenCase{
	{
		name: "gateway",
		cp: func(cp *v1alpha1.HostedControlPlane) {
			cp.Spec.Gateway = &v1alpha1.GatewayReference{Name: "capi", Namespace: "capi-system"}
		},
		listener: &contract.GatewayListener{Name: "tls", Domain: "k8s.example.com", Port: 443},
		endpoint: clusterv1.APIEndpoint{Host: "demo.default.k8s.example.com", Port: 443},
	},
	{
		name: "loadbalancer-tuned",
		cp: func(cp *v1alpha1.HostedControlPlane) {
			s := &cp.Spec
			s.Replicas = ptr.To[int32](3)
			s.APIServer.CertSANs = []string{"api.example.com", "198.51.100.7"}
			s.Deployment.APIServer.Image = &v1alpha1.ImageSpec{Registry: ptr.To("mirror.example.com/k8s")}
			s.Deployment.APIServer.Args = map[string]string{"v": "2", "profiling": "true"}
			s.Deployment.APIServer.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}
			s.Deployment.APIServer.PriorityClassName = "system-cluster-critical"
			s.Deployment.ControllerManager.Replicas = ptr.To[int32](1)
			s.Deployment.Scheduler.ImagePullPolicy = ptr.To(corev1.PullAlways)
			s.Etcd.Replicas = ptr.To[int32](5)
			s.Etcd.StorageClassName = ptr.To("fast-ssd")
			s.Etcd.VolumeSize = ptr.To(resource.MustParse("8Gi"))
			s.Etcd.Args = map[string]string{"quota-backend-bytes": "4294967296"}
			s.Certificates.RootCACertificateDuration = &metav1.Duration{Duration: 20 * 365 * 24 * time.Hour}
			s.Certificates.CACertificateDuration = &metav1.Duration{Duration: 2 * 365 * 24 * time.Hour}
			s.CoreDNS.Replicas = ptr.To[int32](3)
			s.CoreDNS.Image = &v1alpha1.ImageSpec{Registry: ptr.To("mirror.example.com/k8s"), Tag: ptr.To("v1.14.3")}
			s.KubeProxy.Args = map[string]string{"v": "2"}
			s.KonnectivityClient.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}}
		},
		cluster: func(c *clusterv1.Cluster) {
			c.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{"192.168.0.0/16"}
			c.Spec.ClusterNetwork.ServiceDomain = "corp.internal"
		},
		endpoint: clusterv1.APIEndpoint{Host: "192.0.2.10", Port: 6443},
	},
	{
		name: "clusterip-single-etcd",
		cp: func(cp *v1alpha1.HostedControlPlane) {
			cp.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureClusterIP}
			cp.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "api.demo.internal", Port: 443}
			cp.Spec.Etcd.Replicas = ptr.To[int32](1)
		},
		endpoint: clusterv1.APIEndpoint{Host: "api.demo.internal", Port: 443},
	},
	{
		// The host is the user's; the port is the API server's node port,
		// which the controller recorded in the endpoint and the Service then
		// pins, and the agents reach konnectivity on its own node port.
		name: "nodeport",
		cp: func(cp *v1alpha1.HostedControlPlane) {
			cp.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort}
			cp.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "nodes.demo.example.com", Port: 31443}
		},
		endpoint:         clusterv1.APIEndpoint{Host: "nodes.demo.example.com", Port: 31443},
		konnectivityPort: 31132,
	},
}

// input builds the Input of a case, as the reconciler would.
func (c goldenCase) input(t testing.TB) *Input {
	t.Helper()
	cp := &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default", UID: "c0ffee"}}
	cp.Spec.Version = "v1.36.3"
	if c.cp != nil {
		c.cp(cp)
	}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"}}
	cluster.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
	if c.cluster != nil {
		c.cluster(cluster)
	}
	settings := DefaultSettings()
	settings.ControllerNamespace = "hosted-control-plane-system"
	in, err := NewInput(cp, cluster, settings)
	require.NoError(t, err)
	in.Listener, in.Endpoint, in.KonnectivityPort = c.listener, c.endpoint, contract.KonnectivityPort
	if c.listener != nil {
		in.KonnectivityPort = c.listener.Port
	}
	if c.konnectivityPort != 0 {
		in.KonnectivityPort = c.konnectivityPort
	}
	in.SecretHashes = map[string]string{in.EtcdServerSecret(): "e1", in.APIServerCertSecret(): "a1", in.SASecret(): "s1"}
	return in
}

// goldenComponent is what one component renders, checked in as
// testdata/<case>/<file>.yaml so that a change to it shows once in review.
type goldenComponent struct {
	file string
	objs []client.Object
}

// renderComponents renders every component of a control plane, in the
// reconciler's order: the management side, then the workload side.
func renderComponents(t testing.TB, in *Input) []goldenComponent {
	t.Helper()
	configs, err := Configs(in)
	require.NoError(t, err)
	admin := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: in.AdminCertSecret()}, Data: map[string][]byte{
		"tls.crt": []byte("admin certificate"), "tls.key": []byte("admin key"), "ca.crt": []byte("cluster CA"),
	}}
	cluster, err := ClusterKubeconfig(in, admin)
	require.NoError(t, err)
	join, err := Join(in, []byte("cluster CA"))
	require.NoError(t, err)
	kubeProxy, err := KubeProxy(in)
	require.NoError(t, err)
	return []goldenComponent{
		{"exposure", Exposure(in)},
		{"pki", PKI(in)},
		{"configs", configs},
		{"cluster-kubeconfig", []client.Object{cluster}},
		{"etcd", Etcd(in)},
		{"apiserver", APIServer(in)},
		{"controller-manager", ControllerManager(in)},
		{"scheduler", Scheduler(in)},
		// In the workload cluster.
		{"join", join},
		{"kubernetes-service", KubernetesService(in)},
		{"coredns", CoreDNS(in)},
		{"kube-proxy", kubeProxy},
		{"konnectivity-agent", KonnectivityAgent(in)},
	}
}

// renderAll renders every object of a control plane, in the reconciler's order.
func renderAll(t testing.TB, in *Input) []client.Object {
	t.Helper()
	var objs []client.Object
	for _, c := range renderComponents(t, in) {
		objs = append(objs, c.objs...)
	}
	return objs
}

func toYAML(t testing.TB, objs []client.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, o := range objs {
		u, err := apply.Unstructured(o)
		require.NoError(t, err)
		data, err := yaml.Marshal(u.Object)
		require.NoError(t, err)
		buf.WriteString("---\n")
		buf.Write(data)
	}
	return buf.Bytes()
}

// Every rendered object is checked into testdata/<case>/<component>.yaml: a
// change to what a control plane looks like shows up in review as a YAML
// diff, once, in the component it concerns. Run
// `go test ./internal/components -run TestGolden -update` to accept one.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join("testdata", c.name)
			if *update {
				// Rewritten whole, so a component no longer rendered leaves no file behind.
				require.NoError(t, os.RemoveAll(dir))
				require.NoError(t, os.MkdirAll(dir, 0o750))
			}
			var files []string
			for _, comp := range renderComponents(t, c.input(t)) {
				file := comp.file + ".yaml"
				files = append(files, file)
				got := toYAML(t, comp.objs)
				path := filepath.Join(dir, file)
				if *update {
					require.NoError(t, os.WriteFile(path, got, 0o600))
				}
				want, err := os.ReadFile(path)
				require.NoError(t, err, "run go test ./internal/components -run TestGolden -update to create it")
				assert.Equal(t, string(want), string(got), "%s: rendering changed; review and run with -update if intended", path)
			}
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			var present []string
			for _, e := range entries {
				present = append(present, e.Name())
			}
			assert.ElementsMatch(t, files, present, "%s holds a file no component renders", dir)
		})
	}
}

// The same input renders the same bytes every time: a controller restart or
// upgrade never rolls a control plane by itself.
func TestRenderingIsDeterministic(t *testing.T) {
	for _, c := range goldenCases {
		first := toYAML(t, renderAll(t, c.input(t)))
		for range 20 {
			assert.Equal(t, string(first), string(toYAML(t, renderAll(t, c.input(t)))), c.name)
		}
	}
}
