package webhooks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

func TestDefaultAddsVOnlyToVersionNumbers(t *testing.T) {
	for in, want := range map[string]string{"1.36.3": "v1.36.3", "v1.36.3": "v1.36.3", "latest": "latest", "": ""} {
		hcp := &v1alpha1.HostedControlPlane{}
		hcp.Spec.Version = in
		require.NoError(t, HostedControlPlane{}.Default(context.Background(), hcp))
		assert.Equal(t, want, hcp.Spec.Version, in)
	}
}

// Two API servers unless said otherwise; a set number stays.
func TestDefaultReplicas(t *testing.T) {
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, HostedControlPlane{}.Default(context.Background(), hcp))
	assert.Equal(t, ptr.To[int32](2), hcp.Spec.Replicas)
	hcp.Spec.Replicas = ptr.To[int32](5)
	require.NoError(t, HostedControlPlane{}.Default(context.Background(), hcp))
	assert.Equal(t, ptr.To[int32](5), hcp.Spec.Replicas)
}

func TestVersionChange(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{"v1.35.2", "v1.35.3", ""},
		{"v1.35.2", "v1.36.0", ""},
		{"v1.35.2", "v1.36.0-rc.1", ""},
		{"v1.36.0-rc.1", "v1.36.0", ""},
		{"garbage", "v1.30.0", ""}, // a stored version that does not parse may be corrected
		{"v1.35.2", "v1.35.1", "cannot downgrade from v1.35.2 to v1.35.1"},
		{"v1.36.0", "v1.36.0-rc.1", "cannot downgrade"},
		{"v1.34.9", "v1.36.0", "cannot skip a minor version from v1.34.9 to v1.36.0: upgrade to v1.35.x first"},
		{"v1.35.0", "v2.0.0", "cannot change the major version"},
	} {
		errs := validateVersionChange(field.NewPath("spec", "version"), tc.from, tc.to)
		if tc.want == "" {
			assert.Empty(t, errs, "%s -> %s", tc.from, tc.to)
		} else {
			assert.ErrorContains(t, errs.ToAggregate(), tc.want, "%s -> %s", tc.from, tc.to)
		}
	}
}

func TestEtcdScaleDownCountsRunningMembers(t *testing.T) {
	old := &v1alpha1.HostedControlPlane{}
	old.Spec.Etcd.Replicas = ptr.To[int32](3)
	old.Status.Etcd.Members = []string{"etcd-0", "etcd-1", "etcd-2", "etcd-3", "etcd-4"} // a scale-down still in progress
	hcp := old.DeepCopy()
	assert.ErrorContains(t, validateEtcdScaleDown(field.NewPath("r"), old, hcp).ToAggregate(),
		"cannot lower etcd members from 5 to 3 without consent")
	hcp.Annotations = map[string]string{v1alpha1.AllowEtcdScaleDownAnnotation: "true"}
	assert.Empty(t, validateEtcdScaleDown(field.NewPath("r"), old, hcp))
}

func TestVolumeNeverShrinksBelowWhatAutoGrowReached(t *testing.T) {
	old := &v1alpha1.HostedControlPlane{}
	old.Spec.Etcd.AutoGrow = ptr.To(true)
	old.Status.Etcd.VolumeSize = ptr.To(resource.MustParse("12Gi"))
	hcp := old.DeepCopy()
	hcp.Spec.Etcd.AutoGrow = ptr.To(false)
	hcp.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("10Gi"))
	assert.ErrorContains(t, validateVolumeGrowth(field.NewPath("v"), old, hcp).ToAggregate(),
		"cannot shrink etcd volumes from 12Gi to 10Gi")
	hcp.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("12Gi"))
	assert.Empty(t, validateVolumeGrowth(field.NewPath("v"), old, hcp))
}

// The volumes of a running etcd grow; the spec may then go back down to
// the size the volumes have (a growth the StorageClass refused), never
// below; and a spec left as it was is never refused for what the volumes
// became meanwhile.
func TestVolumeGrowsOnARunningEtcdAndMayBePutBack(t *testing.T) {
	path := field.NewPath("spec", "etcd", "volumeSize")
	old := &v1alpha1.HostedControlPlane{}
	old.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("1Gi"))
	old.Status.Etcd.VolumeSize = ptr.To(resource.MustParse("1Gi"))
	hcp := old.DeepCopy()
	hcp.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("2Gi"))
	assert.Empty(t, validateVolumeGrowth(path, old, hcp), "growth of running volumes")

	old, hcp = hcp, hcp.DeepCopy() // grown in the spec, the volumes still 1Gi
	hcp.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("1Gi"))
	assert.Empty(t, validateVolumeGrowth(path, old, hcp), "put back to what the volumes are")
	hcp.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("1536Mi"))
	assert.Empty(t, validateVolumeGrowth(path, old, hcp), "between the volumes and the spec")
	hcp.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("512Mi"))
	assert.EqualError(t, validateVolumeGrowth(path, old, hcp).ToAggregate(),
		"spec.etcd.volumeSize: Forbidden: cannot shrink etcd volumes from 1Gi to 512Mi: volumes only grow; set 1Gi or more")

	old.Status.Etcd.VolumeSize = ptr.To(resource.MustParse("3Gi")) // the provisioner rounded up
	hcp.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("2Gi"))
	assert.Empty(t, validateVolumeGrowth(path, old, hcp), "unchanged")

	fresh := &v1alpha1.HostedControlPlane{}
	fresh.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("4Gi"))
	hcp = fresh.DeepCopy()
	hcp.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("2Gi"))
	assert.ErrorContains(t, validateVolumeGrowth(path, fresh, hcp).ToAggregate(),
		"cannot shrink etcd volumes from 4Gi to 2Gi", "before a volume is bound, the spec is the floor")
}

// A ceiling of autoGrow is at least volumeSize (2Gi by default) and at
// most 1Ti; volumeSize is where the volumes start. Without one, autoGrow
// stops at contract.EtcdMaxVolumeSize, as the closest peer's
// {autoGrow: true} alone means.
func TestAutoGrowCeiling(t *testing.T) {
	path := field.NewPath("spec", "etcd")
	for name, tc := range map[string]struct {
		etcd v1alpha1.EtcdSpec
		want string
	}{
		"no ceiling": {
			etcd: v1alpha1.EtcdSpec{AutoGrow: ptr.To(true)},
		},
		"below the default size": {
			etcd: v1alpha1.EtcdSpec{AutoGrow: ptr.To(true), MaxVolumeSize: ptr.To(resource.MustParse("1Gi"))},
			want: `spec.etcd.maxVolumeSize: Invalid value: "1Gi": must be at least volumeSize (2Gi)`,
		},
		"below volumeSize": {
			etcd: v1alpha1.EtcdSpec{
				AutoGrow: ptr.To(true), VolumeSize: ptr.To(resource.MustParse("4Gi")), MaxVolumeSize: ptr.To(resource.MustParse("3Gi")),
			},
			want: `spec.etcd.maxVolumeSize: Invalid value: "3Gi": must be at least volumeSize (4Gi)`,
		},
		"beyond 1Ti": {
			etcd: v1alpha1.EtcdSpec{AutoGrow: ptr.To(true), MaxVolumeSize: ptr.To(resource.MustParse("2Ti"))},
			want: `spec.etcd.maxVolumeSize: Invalid value: "2Ti": must be at most 1Ti, as volumeSize`,
		},
		"from volumeSize up to the ceiling": {
			etcd: v1alpha1.EtcdSpec{
				AutoGrow: ptr.To(true), VolumeSize: ptr.To(resource.MustParse("1Gi")), MaxVolumeSize: ptr.To(resource.MustParse("16Gi")),
			},
		},
		"a ceiling kept while autoGrow is off": {
			etcd: v1alpha1.EtcdSpec{AutoGrow: ptr.To(false), MaxVolumeSize: ptr.To(resource.MustParse("16Gi"))},
		},
	} {
		t.Run(name, func(t *testing.T) {
			errs := validateEtcd(path, &tc.etcd)
			if tc.want == "" {
				assert.Empty(t, errs)
				return
			}
			assert.EqualError(t, errs.ToAggregate(), tc.want)
		})
	}
}

func TestCertSANs(t *testing.T) {
	ok := []string{"api.example.com", "*.example.com", "10.0.0.1", "2001:db8::1", "localhost"}
	assert.Empty(t, validateCertSANs(field.NewPath("sans"), ok))
	bad := []string{"", "api example.com", "-api.example.com", "*.*.example.com", "http://api.example.com"}
	assert.Len(t, validateCertSANs(field.NewPath("sans"), bad), len(bad))
}

func TestTemplateErrorsPointIntoTheTemplate(t *testing.T) {
	tmpl := &v1alpha1.HostedControlPlaneTemplate{}
	tmpl.Spec.Template.Spec.Gateway = &v1alpha1.GatewayReference{Name: "gw"}
	tmpl.Spec.Template.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort}
	errs := HostedControlPlaneTemplate{}.validate(tmpl)
	require.Len(t, errs, 2)
	assert.Equal(t, "spec.template.spec.gateway.namespace", errs[0].Field)
	assert.Equal(t, "spec.template.spec.exposure", errs[1].Field)
}

// valid is a control plane that passes validation, for tests to break.
func valid() *v1alpha1.HostedControlPlane {
	hcp := &v1alpha1.HostedControlPlane{}
	hcp.Name = "demo"
	hcp.Spec.Version = "v1.36.3"
	return hcp
}

// errorsOf validates a changed copy of valid() and returns its messages.
func errorsOf(change func(*v1alpha1.HostedControlPlane)) []string {
	hcp := valid()
	change(hcp)
	var msgs []string
	for _, e := range ValidateHostedControlPlane(hcp) {
		msgs = append(msgs, e.Error())
	}
	return msgs
}

// change is a case of a valid control plane changed: want is the one error
// it must give, or "" for none.
type change struct {
	name   string
	change func(*v1alpha1.HostedControlPlane)
	want   string
}

func checkChanges(t *testing.T, cases []change) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msgs := errorsOf(tc.change)
			if tc.want == "" {
				assert.Empty(t, msgs)
				return
			}
			require.Len(t, msgs, 1, "%q", msgs)
			assert.Contains(t, msgs[0], tc.want)
		})
	}
}

// assertErrors checks that a valid control plane, changed, fails with the
// wanted messages in order, and only those.
func assertErrors(t *testing.T, change func(*v1alpha1.HostedControlPlane), want []string) {
	t.Helper()
	msgs := errorsOf(change)
	require.Len(t, msgs, len(want), "%q", msgs)
	for i, w := range want {
		assert.Contains(t, msgs[i], w)
	}
}

func TestValidIsValid(t *testing.T) {
	assert.Empty(t, ValidateHostedControlPlane(valid()))
}

func TestVersionRange(t *testing.T) {
	for _, ok := range []string{"v1.31.0", "v1.31.0-rc.1", "v1.33.0", "v1.36.0-rc.1", "v1.36.3", "v1.36.99"} {
		assert.Empty(t, errorsOf(func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = ok }), ok)
	}
	outside := `: this release runs Kubernetes v1.31.x to v1.36.x; choose a version in that range`
	for version, want := range map[string]string{
		"v0.0.1":       `spec.version: Invalid value: "v0.0.1"` + outside,
		"v1.10.0":      `spec.version: Invalid value: "v1.10.0"` + outside,
		"v1.30.9":      `spec.version: Invalid value: "v1.30.9"` + outside,
		"v1.37.0-rc.0": `spec.version: Invalid value: "v1.37.0-rc.0"` + outside,
		"v1.99.0":      `spec.version: Invalid value: "v1.99.0"` + outside,
		"v2.0.0":       `spec.version: Invalid value: "v2.0.0"` + outside,
		"v1.33.0+evil": `spec.version: Invalid value: "v1.33.0+evil": must not carry build metadata (the part after "+")`,
		"latest":       `spec.version: Invalid value: "latest": must be a semantic version such as v1.36.3`,
	} {
		msgs := errorsOf(func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = version })
		if assert.Len(t, msgs, 1, version) {
			assert.Contains(t, msgs[0], want, version)
		}
	}
	long := errorsOf(func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = "v1.33.0-" + strings.Repeat("a", 60) })
	if assert.Len(t, long, 1) {
		assert.Contains(t, long[0], "must fit a label value, as the API server pods are labelled with it")
	}
}

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*v1alpha1.HostedControlPlane)
		want   []string
	}{
		{"tuning flags stay open", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Deployment.APIServer.Args = map[string]string{"v": "2", "audit-log-maxage": "7", "service-account-issuer": "https://issuer.example.com"}
			h.Spec.Etcd.Args = map[string]string{"quota-backend-bytes": "8589934592", "snapshot-count": "5000"}
			h.Spec.Deployment.ControllerManager.Args = map[string]string{"allocate-node-cidrs": "false", "cluster-cidr": "10.244.0.0/16"}
		}, nil},
		{"the API server's etcd", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Deployment.APIServer.Args = map[string]string{"etcd-servers": "https://elsewhere:2379", "etcd_cafile": "/ca.crt"}
		}, []string{
			"spec.deployment.apiServer.args[etcd-servers]: Forbidden: set by the controller (it points the API server at the hosted etcd); remove it",
			"spec.deployment.apiServer.args[etcd_cafile]: Forbidden: set by the controller (it is the etcd client certificate the controller issues and mounts); remove it",
		}},
		{"etcd membership and files", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Etcd.Args = map[string]string{"data-dir": "/tmp", "initial-cluster-state": "existing", "peer-cert-file": "/x"}
		}, []string{
			"spec.etcd.args[data-dir]: Forbidden: set by the controller (it is where the member's volume is mounted); remove it",
			"spec.etcd.args[initial-cluster-state]: Forbidden: set by the controller (it defines the etcd cluster's membership, which the controller manages); remove it",
			"spec.etcd.args[peer-cert-file]: Forbidden: set by the controller (members authenticate each other with the certificates the controller issues); remove it",
		}},
		{"every container has its owned flags", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Deployment.APIServer.Konnectivity.Args = map[string]string{"uds-name": "/x"}
			h.Spec.Deployment.ControllerManager.Args = map[string]string{"cluster-signing-key-file": "/x"}
			h.Spec.Deployment.Scheduler.Args = map[string]string{"kubeconfig": "/x"}
			h.Spec.KonnectivityClient.Args = map[string]string{"proxy-server-host": "x"}
			h.Spec.CoreDNS.Args = map[string]string{"conf": "/x"}
			h.Spec.KubeProxy.Args = map[string]string{"hostname-override": "x", "config": "", "kubeconfig": "/var/lib/kube-proxy/kubeconfig.conf"}
		}, []string{
			"spec.deployment.apiServer.konnectivity.args[uds-name]: Forbidden: set by the controller",
			"spec.deployment.controllerManager.args[cluster-signing-key-file]: Forbidden: set by the controller",
			"spec.deployment.scheduler.args[kubeconfig]: Forbidden: set by the controller",
			"spec.konnectivityClient.args[proxy-server-host]: Forbidden: set by the controller",
			"spec.coredns.args[conf]: Forbidden: set by the controller",
			"spec.kubeProxy.args[hostname-override]: Forbidden: set by the controller",
		}},
		{"malformed and too long", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Deployment.APIServer.Args = map[string]string{"--v": "4", "feature-gates": strings.Repeat("A=true,", 600)}
		}, []string{
			`spec.deployment.apiServer.args[--v]: Invalid value: "--v": must be a flag name without leading dashes`,
			"spec.deployment.apiServer.args[feature-gates]: Too long: may not be more than 4096 bytes",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertErrors(t, tc.change, tc.want)
		})
	}
}

func TestImages(t *testing.T) {
	image := func(registry, repository, tag string) func(*v1alpha1.HostedControlPlane) {
		return func(h *v1alpha1.HostedControlPlane) {
			img := &v1alpha1.ImageSpec{}
			for _, part := range []struct {
				value string
				into  **string
			}{{registry, &img.Registry}, {repository, &img.Repository}, {tag, &img.Tag}} {
				if part.value != "-" {
					*part.into = ptr.To(part.value)
				}
			}
			h.Spec.Etcd.Image = img
		}
	}
	for _, ok := range [][3]string{
		{"registry.k8s.io", "etcd", "3.6.8-0"},
		{"localhost:5000", "kas-network-proxy/proxy-server", "v0.36.0"},
		{"mirror.example.com/k8s", "-", "-"},
		{"[2001:db8::1]:5000", "-", "v1.36.3_custom"},
		{"-", "-", strings.Repeat("a", 128)},
	} {
		assert.Empty(t, errorsOf(image(ok[0], ok[1], ok[2])), ok)
	}
	for _, tc := range []struct{ registry, repository, tag, want string }{
		{"https://registry.example.com", "-", "-", `spec.etcd.image.registry: Invalid value: "https://registry.example.com": must be a registry host`},
		{"registry.example.com/", "-", "-", "spec.etcd.image.registry: Invalid value"},
		{"my_registry", "-", "-", "spec.etcd.image.registry: Invalid value"},
		{"", "-", "-", "spec.etcd.image.registry: Invalid value"},
		{"-", "Etcd", "-", `spec.etcd.image.repository: Invalid value: "Etcd": must be a repository path`},
		{"-", "etcd:3.6", "-", "spec.etcd.image.repository: Invalid value"},
		{"-", "/etcd", "-", "spec.etcd.image.repository: Invalid value"},
		{"-", "-", "-v1", `spec.etcd.image.tag: Invalid value: "-v1": must be an image tag`},
		{"-", "-", "v1@sha256:abc", "spec.etcd.image.tag: Invalid value"},
		{"-", "-", strings.Repeat("a", 129), "spec.etcd.image.tag: Invalid value"},
		{"-", "-", "", "spec.etcd.image.tag: Invalid value"},
	} {
		msgs := errorsOf(image(tc.registry, tc.repository, tc.tag))
		if assert.Len(t, msgs, 1, "%+v", tc) {
			assert.Contains(t, msgs[0], tc.want)
		}
	}
}

func TestWarnings(t *testing.T) {
	hcp := valid()
	hcp.Spec.Deployment.APIServer.Args = map[string]string{
		"authorization-mode": "AlwaysAllow", "profiling": "true", "enable-admission-plugins": "PodSecurity", "v": "2",
	}
	hcp.Spec.Deployment.ControllerManager.Args = map[string]string{"use-service-account-credentials": "false"}
	hcp.Spec.Deployment.Scheduler.Args = map[string]string{"profiling": "false"}
	warnings, err := HostedControlPlane{}.ValidateCreate(context.Background(), hcp)
	require.NoError(t, err, "weakening is allowed")
	assert.Equal(t, []string{
		`spec.deployment.apiServer.args[authorization-mode]: "AlwaysAllow" weakens security: AlwaysAllow lets every authenticated client do anything; the controller sets Node,RBAC`,
		`spec.deployment.apiServer.args[enable-admission-plugins]: "PodSecurity" weakens security: without NodeRestriction, which the controller enables, a kubelet may modify other nodes and their pods`,
		`spec.deployment.apiServer.args[profiling]: "true" weakens security: it serves profiling data, which the controller turns off`,
		`spec.deployment.controllerManager.args[use-service-account-credentials]: "false" weakens security: every controller then acts with the controller manager's own broad permissions instead of its own service account`,
	}, []string(warnings))

	// An update warns about what it changes only.
	updated := hcp.DeepCopy()
	updated.Spec.Deployment.Scheduler.Args["profiling"] = "1"
	warnings, err = HostedControlPlane{}.ValidateUpdate(context.Background(), hcp, updated)
	require.NoError(t, err)
	assert.Equal(t, []string{`spec.deployment.scheduler.args[profiling]: "1" weakens security: it serves profiling data, which the controller turns off`}, []string(warnings))
}

func TestEtcdVolumeAndBackup(t *testing.T) {
	checkChanges(t, []change{
		{"1Ti is the most", func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("1Ti")) }, ""},
		{
			"1Ei", func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("1Ei")) },
			`spec.etcd.volumeSize: Invalid value: "1Ei": must be at most 1Ti`,
		},
		{"backup without a secret", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "@daily"}
		}, "spec.etcd.backup.secret.name: Required value: secret is required: name the Secret that holds the S3 endpoint, bucket and credentials"},
		{"backup secret namespace", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "@daily", Secret: v1alpha1.EtcdBackupSecret{Name: "s3", Namespace: ptr.To("Backups")}}
		}, `spec.etcd.backup.secret.namespace: Invalid value: "Backups": must be a namespace name`},
		{"the secret access key read as the host", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "@daily", Secret: v1alpha1.EtcdBackupSecret{Name: "s3", HostKey: ptr.To("secretAccessKey")}}
		}, `spec.etcd.backup.secret.hostKey: Invalid value: "secretAccessKey": is also spec.etcd.backup.secret.secretAccessKeyKey: each setting of the store must come from a key of its own`},
		{"a key no Secret can have", func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "@daily", Secret: v1alpha1.EtcdBackupSecret{Name: "s3", BucketKey: ptr.To("../bucket")}}
		}, `spec.etcd.backup.secret.bucketKey: Invalid value: "../bucket": must be a key of a Secret's data`},
	})
}

func TestReferenceWarnings(t *testing.T) {
	hcp := valid()
	hcp.Namespace = "tenant-a"
	hcp.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "@daily", Secret: v1alpha1.EtcdBackupSecret{Name: "s3", Namespace: ptr.To("tenant-a")}}
	assert.Empty(t, ReferenceWarnings(hcp), "the control plane's own namespace needs no grant")
	hcp.Spec.Etcd.Backup.Secret.Namespace = ptr.To("capi-system")
	hcp.Spec.Etcd.Restore = &v1alpha1.EtcdRestore{Snapshot: "latest", FromCluster: "tenant-b/victim"}
	assert.Equal(t, []string{
		"spec.etcd.backup.secret names Secret capi-system/s3 in another namespace: the controller uses it only while a ReferenceGrant in capi-system " +
			"allows HostedControlPlanes of namespace tenant-a (group controlplane.cluster.x-k8s.io) to use Secret s3; until then nothing of it is read",
		"spec.etcd.restore.fromCluster names Cluster tenant-b/victim in another namespace: the controller uses it only while a ReferenceGrant in tenant-b " +
			"allows HostedControlPlanes of namespace tenant-a (group controlplane.cluster.x-k8s.io) to use Cluster victim; until then nothing of it is read",
	}, ReferenceWarnings(hcp))
}

func TestEtcdRestore(t *testing.T) {
	backup := &v1alpha1.EtcdBackup{Schedule: "@daily", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}
	restore := func(r v1alpha1.EtcdRestore, b *v1alpha1.EtcdBackup) func(*v1alpha1.HostedControlPlane) {
		return func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Restore, h.Spec.Etcd.Backup = &r, b }
	}
	checkChanges(t, []change{
		{"latest", restore(v1alpha1.EtcdRestore{Snapshot: "latest"}, backup), ""},
		{"latest of another cluster", restore(v1alpha1.EtcdRestore{Snapshot: "latest", FromCluster: "team-a/prod"}, backup), ""},
		{"a key", restore(v1alpha1.EtcdRestore{Snapshot: "team-a/prod/20260102T030405.000Z-rev1234.db"}, backup), ""},
		{"a key under the bucket's prefix", restore(v1alpha1.EtcdRestore{Snapshot: "etcd/eu/team-a/prod/20260102T030405.000Z-rev1234.db"}, backup), ""},
		{
			"without backup", restore(v1alpha1.EtcdRestore{Snapshot: "latest"}, nil),
			"spec.etcd.restore: Forbidden: needs spec.etcd.backup: the snapshot is read from the store that spec.etcd.backup.secret names",
		},
		{
			"a key not of a snapshot", restore(v1alpha1.EtcdRestore{Snapshot: "team-a/prod/backup.db"}, backup),
			`spec.etcd.restore.snapshot: Invalid value: "team-a/prod/backup.db": must be "latest" or an object key as status.etcd.lastBackupKey shows it`,
		},
		{
			"a key without its cluster's folder", restore(v1alpha1.EtcdRestore{Snapshot: "20260102T030405.000Z-rev1234.db"}, backup),
			`spec.etcd.restore.snapshot: Invalid value: "20260102T030405.000Z-rev1234.db": must be "latest" or an object key`,
		},
		{
			"a key climbing out", restore(v1alpha1.EtcdRestore{Snapshot: "../team-a/prod/20260102T030405.000Z-rev1234.db"}, backup),
			`spec.etcd.restore.snapshot: Invalid value: "../team-a/prod/20260102T030405.000Z-rev1234.db": must be "latest" or an object key`,
		},
		{
			"a key and a cluster", restore(v1alpha1.EtcdRestore{Snapshot: "team-a/prod/20260102T030405.000Z-rev1234.db", FromCluster: "team-a/prod"}, backup),
			`spec.etcd.restore.fromCluster: Forbidden: applies only to snapshot "latest"`,
		},
		{
			"a cluster without namespace", restore(v1alpha1.EtcdRestore{Snapshot: "latest", FromCluster: "prod"}, backup),
			`spec.etcd.restore.fromCluster: Invalid value: "prod": must be <namespace>/<name> of the Cluster whose snapshots to look in`,
		},
		{
			"a cluster malformed", restore(v1alpha1.EtcdRestore{Snapshot: "latest", FromCluster: "Team/prod"}, backup),
			`spec.etcd.restore.fromCluster: Invalid value: "Team/prod": must be <namespace>/<name>`,
		},
	})
}

func TestEtcdRestoreIsSetOnlyOnCreate(t *testing.T) {
	withRestore := func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "@daily", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}
		h.Spec.Etcd.Restore = &v1alpha1.EtcdRestore{Snapshot: "latest"}
	}
	const want = "spec.etcd.restore: Forbidden: cannot be added, changed or removed: etcd is restored only before it first starts; set it when creating the control plane"
	for _, tc := range []struct {
		name        string
		old, change func(*v1alpha1.HostedControlPlane)
		want        string
	}{
		{"added", func(h *v1alpha1.HostedControlPlane) { withRestore(h); h.Spec.Etcd.Restore = nil }, withRestore, want},
		{"removed", withRestore, func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Restore = nil }, want},
		{"changed", withRestore, func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Restore.FromCluster = "team-a/prod" }, want},
		{"kept", withRestore, func(h *v1alpha1.HostedControlPlane) { h.Spec.Replicas = ptr.To[int32](3) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := valid()
			tc.old(old)
			hcp := old.DeepCopy()
			tc.change(hcp)
			_, err := HostedControlPlane{}.ValidateUpdate(context.Background(), old, hcp)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestRestoreInPlaceRequest(t *testing.T) {
	backup := &v1alpha1.EtcdBackup{Schedule: "@daily", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}
	ask := func(value string, b *v1alpha1.EtcdBackup) func(*v1alpha1.HostedControlPlane) {
		return func(h *v1alpha1.HostedControlPlane) {
			h.Annotations = map[string]string{v1alpha1.RestoreEtcdAnnotation: value}
			h.Spec.Etcd.Backup = b
		}
	}
	const path = "metadata.annotations[controlplane.cluster.x-k8s.io/restore-etcd]"
	checkChanges(t, []change{
		{"latest", ask("latest", backup), ""},
		{"a key", ask("team-a/prod/20260102T030405.000Z-rev1234.db", backup), ""},
		{"without backup", ask("latest", nil), path + ": Forbidden: needs spec.etcd.backup"},
		{"a key not of a snapshot", ask("yesterday", backup), path + `: Invalid value: "yesterday": must be "latest" or an object key`},
		{"a key climbing out", ask("../team-a/prod/20260102T030405.000Z-rev1234.db", backup), path + ": Invalid value"},
	})

	hcp := valid()
	ask("latest", backup)(hcp)
	_, err := HostedControlPlane{}.ValidateCreate(context.Background(), hcp)
	require.ErrorContains(t, err, path+": Forbidden: a new control plane has no etcd to restore in place; set spec.etcd.restore to start it from a snapshot")

	// While one restore is under way another is refused; the controller
	// removing the annotation is not.
	old := valid()
	old.Spec.Etcd.Backup = backup
	old.Status.Etcd.Restoring = &v1alpha1.EtcdRestoring{ID: "20261123T200000Z", Key: "team-a/prod/20260102T030405.000Z-rev1234.db"}
	again := old.DeepCopy()
	ask("latest", backup)(again)
	_, err = HostedControlPlane{}.ValidateUpdate(context.Background(), old, again)
	require.ErrorContains(t, err, path+": Forbidden: a restore in place from team-a/prod/20260102T030405.000Z-rev1234.db is under way (status.etcd.restoring)")
	_, err = HostedControlPlane{}.ValidateUpdate(context.Background(), again, old)
	require.NoError(t, err)
	old.Status.Etcd.Restoring = nil
	_, err = HostedControlPlane{}.ValidateUpdate(context.Background(), old, again)
	require.NoError(t, err, "once it ended, a restore may be asked for again")
}

func TestTemplateRefusesRestore(t *testing.T) {
	tmpl := &v1alpha1.HostedControlPlaneTemplate{}
	tmpl.Spec.Template.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "@daily", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}
	tmpl.Spec.Template.Spec.Etcd.Restore = &v1alpha1.EtcdRestore{Snapshot: "latest"}
	errs := HostedControlPlaneTemplate{}.validate(tmpl)
	require.Len(t, errs, 1)
	assert.Equal(t, "spec.template.spec.etcd.restore: Forbidden: not supported yet in a template: a restore is set on the HostedControlPlane of one Cluster, when it is created", errs[0].Error())
}

func TestEndpointByExposure(t *testing.T) {
	exposed := func(typ v1alpha1.ExposureType, host string, port int32) func(*v1alpha1.HostedControlPlane) {
		return func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Exposure = &v1alpha1.Exposure{Type: typ}
			h.Spec.ControlPlaneEndpoint.Host, h.Spec.ControlPlaneEndpoint.Port = host, port
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*v1alpha1.HostedControlPlane)
		want   []string
	}{
		{"ClusterIP with both", exposed(v1alpha1.ExposureClusterIP, "api.example.com", 443), nil},
		{"ClusterIP without port", exposed(v1alpha1.ExposureClusterIP, "api.example.com", 0), []string{
			"spec.controlPlaneEndpoint.port: Required value: exposure type ClusterIP needs the port you route to the API server Service",
		}},
		{"ClusterIP without either", exposed(v1alpha1.ExposureClusterIP, "", 0), []string{
			"spec.controlPlaneEndpoint.host: Required value", "spec.controlPlaneEndpoint.port: Required value",
		}},
		{"NodePort without endpoint", exposed(v1alpha1.ExposureNodePort, "", 0), nil},
		{"NodePort with a host", exposed(v1alpha1.ExposureNodePort, "192.0.2.10", 0), nil},
		{"NodePort with a node port", exposed(v1alpha1.ExposureNodePort, "", 30443), nil},
		{"NodePort outside the range", exposed(v1alpha1.ExposureNodePort, "192.0.2.10", 6443), []string{
			"spec.controlPlaneEndpoint.port: Invalid value: 6443: with exposure type NodePort the port is the node port the API server Service asks for, so it must be within 30000-32767",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertErrors(t, tc.change, tc.want)
		})
	}
}

func TestUpdates(t *testing.T) {
	gateway := func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Gateway = &v1alpha1.GatewayReference{Name: "capi", Namespace: "capi-system"}
	}
	nodePort := func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort}
	}
	for _, tc := range []struct {
		name        string
		old, change func(*v1alpha1.HostedControlPlane)
		want        string
	}{
		{
			"a gateway added to the default exposure", func(*v1alpha1.HostedControlPlane) {}, gateway,
			"spec.gateway: Forbidden: a gateway cannot be added to a control plane that is already served through a LoadBalancer Service (the default exposure)",
		},
		{
			"a gateway added to a chosen exposure", nodePort, func(h *v1alpha1.HostedControlPlane) { h.Spec.Exposure = nil; gateway(h) },
			"spec.gateway: Forbidden: a gateway cannot be added to a control plane that is already served through a NodePort Service (spec.exposure.type)",
		},
		{
			"a gateway removed", gateway, func(h *v1alpha1.HostedControlPlane) { h.Spec.Gateway = nil },
			"spec.gateway: Forbidden: the gateway cannot be removed: the control plane is served through the Gateway capi-system/capi",
		},
		{
			"a default exposure changed", func(*v1alpha1.HostedControlPlane) {}, nodePort,
			"spec.exposure.type: Forbidden: cannot change once set (was LoadBalancer, the default)",
		},
		{
			"the default exposure made explicit", func(*v1alpha1.HostedControlPlane) {},
			func(h *v1alpha1.HostedControlPlane) {
				h.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureLoadBalancer}
			}, "",
		},
		{
			"a host changed", func(h *v1alpha1.HostedControlPlane) { h.Spec.ControlPlaneEndpoint.Host = "a.example.com" },
			func(h *v1alpha1.HostedControlPlane) { h.Spec.ControlPlaneEndpoint.Host = "b.example.com" },
			"spec.controlPlaneEndpoint.host: Forbidden: cannot change once set (was a.example.com)",
		},
		{
			"a port changed", func(h *v1alpha1.HostedControlPlane) { h.Spec.ControlPlaneEndpoint.Port = 30443 },
			func(h *v1alpha1.HostedControlPlane) { h.Spec.ControlPlaneEndpoint.Port = 30444 },
			"spec.controlPlaneEndpoint.port: Forbidden: cannot change once set (was 30443)",
		},
		{"a node port filled in after the host", func(h *v1alpha1.HostedControlPlane) {
			nodePort(h)
			h.Spec.ControlPlaneEndpoint.Host = "192.0.2.10"
		}, func(h *v1alpha1.HostedControlPlane) { h.Spec.ControlPlaneEndpoint.Port = 31234 }, ""},
		{"a host filled in after the port", func(h *v1alpha1.HostedControlPlane) {
			nodePort(h)
			h.Spec.ControlPlaneEndpoint.Port = 31234
		}, func(h *v1alpha1.HostedControlPlane) { h.Spec.ControlPlaneEndpoint.Host = "192.0.2.10" }, ""},
		{
			"a volume size removed", func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("4Gi")) },
			func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.VolumeSize = nil },
			"spec.etcd.volumeSize: Forbidden: cannot be removed once set (was 4Gi): volumes only grow, and without it they would be sized at the default 2Gi; set it to at least 4Gi",
		},
		{
			"a service account issuer changed", func(h *v1alpha1.HostedControlPlane) { h.Spec.ServiceAccountIssuer = "https://a.example.com" },
			func(h *v1alpha1.HostedControlPlane) { h.Spec.ServiceAccountIssuer = "https://b.example.com" },
			"spec.serviceAccountIssuer: Forbidden: cannot change once set (was https://a.example.com): the service account tokens signed for it would be refused",
		},
		{
			"a service account issuer removed", func(h *v1alpha1.HostedControlPlane) { h.Spec.ServiceAccountIssuer = "https://a.example.com" },
			func(h *v1alpha1.HostedControlPlane) { h.Spec.ServiceAccountIssuer = "" },
			"spec.serviceAccountIssuer: Forbidden: cannot change once set (was https://a.example.com)",
		},
		{
			"a service account issuer added", func(*v1alpha1.HostedControlPlane) {},
			func(h *v1alpha1.HostedControlPlane) { h.Spec.ServiceAccountIssuer = "https://a.example.com" }, "",
		},
		{
			"an upgrade beyond the supported range", func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = "v1.36.3" },
			func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = "v1.37.0" },
			`spec.version: Invalid value: "v1.37.0": this release runs Kubernetes v1.31.x to v1.36.x`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := valid()
			tc.old(old)
			hcp := old.DeepCopy()
			tc.change(hcp)
			_, err := HostedControlPlane{}.ValidateUpdate(context.Background(), old, hcp)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			var status apierrors.APIStatus
			require.ErrorAs(t, err, &status)
			assert.Len(t, status.Status().Details.Causes, 1, "one problem: %v", err)
		})
	}
}

// A rule added later refuses new input but not an unrelated change of an
// object stored before it: the controller must still remove its finalizer.
func TestUpdatesRatchetWhatWasStored(t *testing.T) {
	old := valid()
	old.Spec.Version = "v1.30.2"
	old.Spec.Etcd.Args = map[string]string{"data-dir": "/var/lib/etcd/other"}
	hcp := old.DeepCopy()
	hcp.Finalizers = nil
	hcp.Spec.Replicas = ptr.To[int32](3)
	_, err := HostedControlPlane{}.ValidateUpdate(context.Background(), old, hcp)
	require.NoError(t, err)

	hcp.Spec.Version = "v1.30.3"
	hcp.Spec.Etcd.Args["name"] = "x"
	_, err = HostedControlPlane{}.ValidateUpdate(context.Background(), old, hcp)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `spec.version: Invalid value: "v1.30.3": this release runs Kubernetes v1.31.x to v1.36.x`)
	assert.Contains(t, err.Error(), "spec.etcd.args[name]: Forbidden")
	assert.NotContains(t, err.Error(), "data-dir")
}

func TestTemplateUpdatesRatchetToo(t *testing.T) {
	old := &v1alpha1.HostedControlPlaneTemplate{}
	old.Spec.Template.Spec.KubeProxy.Args = map[string]string{"hostname-override": "mine"}
	tmpl := old.DeepCopy()
	tmpl.Labels = map[string]string{"a": "b"}
	_, err := HostedControlPlaneTemplate{}.ValidateUpdate(context.Background(), old, tmpl)
	require.NoError(t, err)
	_, err = HostedControlPlaneTemplate{}.ValidateCreate(context.Background(), tmpl)
	assert.ErrorContains(t, err, "spec.template.spec.kubeProxy.args[hostname-override]: Forbidden: set by the controller (it must be the node's name, which each pod reads from its own spec); remove it")
}

// Lifetimes have bounds, and nothing outlives the authority that signs it;
// what was accepted before stays accepted.
func TestCertificateLifetimes(t *testing.T) {
	d := func(s string) *metav1.Duration {
		v, err := time.ParseDuration(s)
		require.NoError(t, err)
		return &metav1.Duration{Duration: v}
	}
	for _, tc := range []struct {
		spec v1alpha1.CertificatesSpec
		want string
	}{
		{v1alpha1.CertificatesSpec{}, ""},
		{v1alpha1.CertificatesSpec{RootCACertificateDuration: d("24h"), CACertificateDuration: d("24h")}, ""},
		{v1alpha1.CertificatesSpec{LeafCertificateDuration: d("1h"), KubeconfigCertificateDuration: d("8760h")}, ""},
		{v1alpha1.CertificatesSpec{CACertificateDuration: d("720h"), LeafCertificateDuration: d("720h")}, ""},
		{v1alpha1.CertificatesSpec{RootCACertificateDuration: d("23h")}, `spec.certificates.rootCaCertificateDuration: Invalid value: "23h0m0s": must be at least 24h`},
		{v1alpha1.CertificatesSpec{RootCACertificateDuration: d("48h"), CACertificateDuration: d("96h")}, "rootCaCertificateDuration: Invalid value: \"48h0m0s\": must be at least caCertificateDuration (96h0m0s)"},
		{v1alpha1.CertificatesSpec{LeafCertificateDuration: d("30m")}, `spec.certificates.leafCertificateDuration: Invalid value: "30m0s": must be at least 1h`},
		{v1alpha1.CertificatesSpec{LeafCertificateDuration: d("8761h")}, `spec.certificates.leafCertificateDuration: Invalid value: "8761h0m0s": must be at most 8760h`},
		{v1alpha1.CertificatesSpec{KubeconfigCertificateDuration: d("59m")}, `spec.certificates.kubeconfigCertificateDuration: Invalid value: "59m0s": must be at least 1h`},
		{
			v1alpha1.CertificatesSpec{CACertificateDuration: d("48h"), LeafCertificateDuration: d("72h")},
			`spec.certificates.leafCertificateDuration: Invalid value: "72h0m0s": must be at most caCertificateDuration (48h0m0s): the etcd and front-proxy CAs sign leaves`,
		},
		{
			v1alpha1.CertificatesSpec{RootCACertificateDuration: d("48h"), KubeconfigCertificateDuration: d("72h")},
			`spec.certificates.kubeconfigCertificateDuration: Invalid value: "72h0m0s": must be at most rootCaCertificateDuration (48h0m0s): the cluster CA signs the admin certificate`,
		},
	} {
		errs := validateCertificates(field.NewPath("spec", "certificates"), &tc.spec)
		if tc.want == "" {
			assert.Empty(t, errs, "%+v", tc.spec)
		} else {
			assert.ErrorContains(t, errs.ToAggregate(), tc.want)
		}
	}
}

func TestRotateRequest(t *testing.T) {
	ask := func(value string) func(*v1alpha1.HostedControlPlane) {
		return func(h *v1alpha1.HostedControlPlane) {
			h.Annotations = map[string]string{v1alpha1.RotateAnnotation: value}
		}
	}
	const path = "metadata.annotations[controlplane.cluster.x-k8s.io/rotate]"
	const allowed = "must be a comma-separated list of service-account-key, encryption-key, etcd-ca, front-proxy-ca, cluster-ca, or emergency for all but the cluster CA"
	checkChanges(t, []change{
		{"the service account key", ask("service-account-key"), ""},
		{"both", ask("service-account-key, encryption-key"), ""},
		{"everything", ask("emergency"), ""},
		{"an unknown key", ask("service-account-key,kubelet-ca"), path + `: Invalid value: "service-account-key,kubelet-ca": ` + allowed},
		{"the cluster CA", ask("etcd-ca,cluster-ca"), ""},
		{"nothing", ask(""), path + `: Invalid value: "": ` + allowed},
	})
}

func TestDropOldKeyRequest(t *testing.T) {
	ask := func(value string) func(*v1alpha1.HostedControlPlane) {
		return func(h *v1alpha1.HostedControlPlane) {
			h.Annotations = map[string]string{v1alpha1.DropOldServiceAccountKeyAnnotation: value}
		}
	}
	const path = "metadata.annotations[controlplane.cluster.x-k8s.io/drop-old-service-account-key]"
	checkChanges(t, []change{
		{"true", ask("true"), ""},
		{"a duration", ask("10m"), path + `: Invalid value: "10m": must be "true", which drops the old service account key of the rotation under way without waiting for its tokens to expire; remove the annotation to wait`},
		{"false", ask("false"), path + `: Invalid value: "false": must be "true"`},
	})
}

func TestTokenLifetime(t *testing.T) {
	set := func(name, value string) func(*v1alpha1.HostedControlPlane) {
		return func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Deployment.APIServer.Args = map[string]string{name: value}
		}
	}
	const path = "spec.deployment.apiServer.args[service-account-max-token-expiration]"
	checkChanges(t, []change{
		{"a day", set("service-account-max-token-expiration", "24h"), ""},
		{"an hour", set("service-account-max-token-expiration", "1h"), ""},
		{"shorter than an hour", set("service-account-max-token-expiration", "30m"), path + `: Invalid value: "30m": must be a duration from 1h`},
		{"not a duration", set("service-account-max-token-expiration", "1d"), path + `: Invalid value: "1d"`},
		{"the other spelling", set("service_account_max_token_expiration", "10m"), "spec.deployment.apiServer.args[service_account_max_token_expiration]: Invalid value"},
	})
}
