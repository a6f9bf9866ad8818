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

// goldenCase is a representative control plane and where it is served.
type goldenCase struct {
	name     string
	cp       func(*v1alpha1.HostedControlPlane)
	cluster  func(*clusterv1.Cluster)
	listener *contract.GatewayListener
	endpoint clusterv1.APIEndpoint
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
	in.SecretHashes = map[string]string{in.EtcdServerSecret(): "e1", in.APIServerCertSecret(): "a1", in.SASecret(): "s1"}
	return in
}

// renderAll renders every object of a control plane, in the reconciler's order.
func renderAll(t testing.TB, in *Input) []client.Object {
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
	var objs []client.Object
	for _, group := range [][]client.Object{
		Exposure(in), PKI(in), configs,
		{cluster},
		Etcd(in), APIServer(in), ControllerManager(in), Scheduler(in),
		// In the workload cluster.
		join, CoreDNS(in), kubeProxy, KonnectivityAgent(in),
	} {
		objs = append(objs, group...)
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

// Every rendered object is checked into testdata/: a change to what a
// control plane looks like shows up in review as a YAML diff. Run
// `go test ./internal/components -update` to accept one.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			got := toYAML(t, renderAll(t, c.input(t)))
			path := filepath.Join("testdata", c.name+".yaml")
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o600))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./internal/components -update to create it")
			assert.Equal(t, string(want), string(got), "rendering changed; review and run with -update if intended")
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
