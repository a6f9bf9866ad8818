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
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/apply"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
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
	// cilium is whether the management cluster serves Cilium's policies.
	cilium bool
	// managementAPIServer are the management API server's addresses the
	// controller found.
	managementAPIServer []string
}

var goldenCases = []goldenCase{
	{
		// The closest peer's mode, with the API server files its users set.
		name: "gateway",
		cp: func(cp *v1alpha1.HostedControlPlane) {
			cp.Spec.Gateway = &v1alpha1.GatewayReference{Name: "capi", Namespace: "capi-system"}
			cp.Spec.ServiceAccountIssuer = "https://demo.default.k8s.example.com"
			cp.Spec.ManagementServiceAccounts = &v1alpha1.ManagementServiceAccounts{Namespaces: []string{"capi-system", "default"}}
			cp.Spec.OIDCProviders = map[string]v1alpha1.OIDCProvider{
				"https://sso.example.com": {
					Audiences:            []string{"demo"},
					ClaimMappings:        v1alpha1.OIDCClaimMappings{Username: "claims.email", Groups: "claims.groups"},
					ClaimValidationRules: []v1alpha1.OIDCClaimValidationRule{{Expression: "claims.email_verified == true", Message: "email must be verified"}},
				},
				"https://login.example.org:8443/realms/k8s": {
					CertificateAuthority: "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n",
					Audiences:            []string{"demo", "kubectl"},
					ClaimMappings:        v1alpha1.OIDCClaimMappings{Username: `"oidc:" + claims.sub`},
				},
			}
			cp.Spec.Deployment.APIServer.Audit = &v1alpha1.Audit{
				Mode:   ptr.To(v1alpha1.AuditBlocking),
				Policy: auditv1.Policy{Rules: []auditv1.PolicyRule{{Level: auditv1.LevelMetadata}}},
				Webhook: &v1alpha1.AuditWebhook{Targets: []v1alpha1.AuditWebhookTarget{{
					Server:         "https://audit.example.com:9443/events",
					Authentication: &v1alpha1.AuditWebhookAuthentication{SecretName: "audit-token"},
				}}},
			}
			cp.Spec.Deployment.APIServer.Mounts = map[string]v1alpha1.Mount{
				"admission": {Path: "/etc/kubernetes/admission", ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "admission"}}},
				"authz":     {Path: "/etc/authz", Secret: &corev1.SecretVolumeSource{SecretName: "authz", Optional: ptr.To(true)}},
			}
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
			s.Etcd.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
			s.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "@daily", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}
			s.Etcd.Restore = &v1alpha1.EtcdRestore{Snapshot: v1alpha1.LatestSnapshot}
			s.Certificates.RootCACertificateDuration = &metav1.Duration{Duration: 20 * 365 * 24 * time.Hour}
			s.Certificates.CACertificateDuration = &metav1.Duration{Duration: 2 * 365 * 24 * time.Hour}
			s.Certificates.LeafCertificateDuration = &metav1.Duration{Duration: 30 * 24 * time.Hour}
			s.Certificates.KubeconfigCertificateDuration = &metav1.Duration{Duration: 2 * time.Hour}
			s.CoreDNS.Replicas = ptr.To[int32](3)
			s.CoreDNS.Image = &v1alpha1.ImageSpec{Registry: ptr.To("mirror.example.com/k8s"), Tag: ptr.To("v1.14.3")}
			s.KubeProxy.Args = map[string]string{"v": "2"}
			s.KonnectivityClient.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}}
			// Two targets: the forwarder beside the API server posts to both.
			s.Deployment.APIServer.Audit = &v1alpha1.Audit{
				Policy: auditv1.Policy{Rules: []auditv1.PolicyRule{{Level: auditv1.LevelMetadata}}},
				Webhook: &v1alpha1.AuditWebhook{
					Container: v1alpha1.Container{
						Args:      map[string]string{"timeout": "10s"},
						Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")}},
					},
					Targets: []v1alpha1.AuditWebhookTarget{
						{Server: "https://siem.example.com/audit", Authentication: &v1alpha1.AuditWebhookAuthentication{SecretName: "siem", SecretNamespace: ptr.To("logging")}},
						{Server: "https://archive.example.com:8443", CertificateAuthority: "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n"},
					},
				},
			}
		},
		cluster: func(c *clusterv1.Cluster) {
			c.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{"192.168.0.0/16"}
			c.Spec.ClusterNetwork.ServiceDomain = "corp.internal"
		},
		endpoint:            clusterv1.APIEndpoint{Host: "192.0.2.10", Port: 6443},
		cilium:              true,
		managementAPIServer: []string{"10.96.0.1", "172.18.0.2", "fd00:10:96::1"},
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

// input is the Input of a case: the control plane and its Cluster, and
// what the controller observed of them.
func (c goldenCase) input(t testing.TB) render.Input {
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
	settings := render.DefaultSettings()
	settings.ControllerNamespace = "hosted-control-plane-system"
	settings.ManagementAPIServer = c.managementAPIServer
	in, err := render.NewInput(cp, cluster, settings)
	require.NoError(t, err)
	observed := render.Observed{
		Listener: c.listener, Endpoint: c.endpoint, KonnectivityPort: contract.KonnectivityPort,
		SecretDigests: map[string]string{"demo-etcd-server": "e1", "demo-apiserver": "a1", "demo-sa": "s1"},
		Admin:         render.Credentials{Cert: []byte("admin certificate"), Key: []byte("admin key"), CA: []byte("cluster CA")},
		ClusterCA:     []byte("cluster CA"),
		Cilium:        c.cilium,
		MountDigests:  map[string]string{"admission": "m1", "authz": "m2"},
	}
	if cp.Spec.ManagementServiceAccounts != nil {
		observed.ManagementIssuer = &render.ManagementIssuer{
			URL: "https://management.example.com", Algorithms: []string{"RS256"}, Keys: []byte(`{"keys":[{"kid":"k1"}]}`),
		}
	}
	if audit := cp.Spec.Deployment.APIServer.Audit; audit != nil && audit.Webhook != nil {
		observed.AuditWebhookTokens = make([][]byte, len(audit.Webhook.Targets))
		for i, target := range audit.Webhook.Targets {
			if target.Authentication != nil {
				observed.AuditWebhookTokens[i] = []byte("audit token")
			}
		}
	}
	if c.listener != nil {
		observed.KonnectivityPort = c.listener.Port
	}
	if c.konnectivityPort != 0 {
		observed.KonnectivityPort = c.konnectivityPort
	}
	return in.With(observed)
}

// goldenComponent is what one component renders, checked in as
// testdata/<case>/<name>.yaml so that a change to it shows once in review.
type goldenComponent struct {
	name string
	objs []client.Object
}

// renderComponents renders every component of a control plane through the
// reconciler's lists: the management side, then the workload side.
func renderComponents(t testing.TB, in render.Input) []goldenComponent {
	t.Helper()
	var out []goldenComponent
	for _, c := range append(Management(etcd.Component{}), Workload()...) {
		objs, err := c.Render(in)
		require.NoError(t, err, c.Name())
		out = append(out, goldenComponent{c.Name(), objs})
	}
	return out
}

// renderAll renders every object of a control plane, in the reconciler's order.
func renderAll(t testing.TB, in render.Input) []client.Object {
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
				file := comp.name + ".yaml"
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
