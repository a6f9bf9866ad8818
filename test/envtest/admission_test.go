package envtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// Manifests users already have must apply unchanged and mean what they say.
func TestExistingManifestsApplyUnchanged(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	for name, text := range map[string]string{
		"replicas": `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlane
metadata: {name: plain}
spec: {version: v1.33.0, replicas: 3}`,
		"gateway": `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlane
metadata: {name: gateway}
spec: {version: v1.33.0, replicas: 3, gateway: {name: capi, namespace: capi-system}}`,
		"template": `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlaneTemplate
metadata: {name: template}
spec:
  template:
    spec:
      replicas: 3
      gateway: {name: capi, namespace: capi-system}
      apiServer:
        certSANs: [api.example.com, 192.0.2.10]`,
		"every existing field": `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlane
metadata: {name: everything}
spec:
  version: v1.33.0
  replicas: 2
  controlPlaneEndpoint: {host: api.example.com, port: 443}
  gateway: {name: capi, namespace: capi-system}
  apiServer: {certSANs: [api.example.com]}
  deployment:
    apiServer:
      image: {registry: registry.example.com, repository: kube-apiserver, tag: v1.33.0}
      imagePullPolicy: IfNotPresent
      args: {v: "2", audit-log-maxage: "7"}
      resources: {requests: {cpu: 100m, memory: 256Mi}, limits: {memory: 1Gi}}
      priorityClassName: system-cluster-critical
      konnectivity: {args: {v: "1"}}
    controllerManager: {replicas: 2, args: {v: "1"}, priorityClassName: high}
    scheduler: {replicas: 1, image: {tag: v1.33.0}}
  etcd:
    image: {repository: etcd, tag: 3.6.8-0}
    args: {quota-backend-bytes: "8589934592"}
    resources: {requests: {cpu: 200m}}
    priorityClassName: system-cluster-critical
    volumeSize: 2Gi
    autoGrow: false
    backup:
      schedule: "0 3 * * *"
      secret: {name: s3, namespace: backups, accessKeyIDKey: id, secretAccessKeyKey: key, hostKey: endpoint, regionKey: zone, bucketKey: path}
  konnectivityClient: {replicas: 3, args: {v: "1"}}
  coredns: {replicas: 2, resources: {limits: {memory: 170Mi}}}
  kubeProxy: {disabled: true}
  certificates: {rootCaCertificateDuration: 87600h0m0s, caCertificateDuration: 43800h0m0s}`,
	} {
		t.Run(name, func(t *testing.T) {
			obj, err := create(t, ns, text)
			require.NoError(t, err)
			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(obj.GroupVersionKind())
			require.NoError(t, env.Client.Get(testContext(t), client.ObjectKeyFromObject(obj), stored))
			assertSubset(t, "spec", manifest(t, text).Object["spec"], stored.Object["spec"])
		})
	}

	// And they mean what they say to the code that reads them.
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "gateway"}, hcp))
	assert.Equal(t, "v1.33.0", hcp.Spec.Version)
	assert.Equal(t, ptr.To[int32](3), hcp.Spec.Replicas)
	assert.Equal(t, &v1alpha1.GatewayReference{Name: "capi", Namespace: "capi-system"}, hcp.Spec.Gateway)
	tmpl := &v1alpha1.HostedControlPlaneTemplate{}
	require.NoError(t, env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "template"}, tmpl))
	assert.Equal(t, ptr.To[int32](3), tmpl.Spec.Template.Spec.Replicas)
	assert.Equal(t, []string{"api.example.com", "192.0.2.10"}, tmpl.Spec.Template.Spec.APIServer.CertSANs)
	assert.Equal(t, "capi", tmpl.Spec.Template.Spec.Gateway.Name)
}

func TestDefaulting(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	_, err := create(t, ns, `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlane
metadata: {name: defaults}
spec:
  version: 1.34.2
  exposure: {}
  etcd:
    backup: {schedule: "@daily", secret: {name: s3}}`)
	require.NoError(t, err)
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "defaults"}, hcp))
	assert.Equal(t, "v1.34.2", hcp.Spec.Version, "the missing v is added")
	assert.Equal(t, ptr.To[int32](2), hcp.Spec.Replicas, "two API servers by default")
	assert.Equal(t, ptr.To[int32](3), hcp.Spec.Etcd.Replicas, "three etcd members by default")
	assert.Equal(t, v1alpha1.ExposureLoadBalancer, hcp.Spec.Exposure.Type)
	assert.Equal(t, ptr.To[int32](7), hcp.Spec.Etcd.Backup.RetentionCount)
	s := hcp.Spec.Etcd.Backup.Secret
	assert.Equal(t, []string{"accessKeyID", "secretAccessKey", "host", "region", "bucket", "ca.crt"},
		[]string{*s.AccessKeyIDKey, *s.SecretAccessKeyKey, *s.HostKey, *s.RegionKey, *s.BucketKey, *s.CAKey})

	// Without any etcd section the members still default to three.
	_, err = create(t, ns, `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlaneTemplate
metadata: {name: defaults}
spec: {template: {spec: {}}}`)
	require.NoError(t, err)
	tmpl := &v1alpha1.HostedControlPlaneTemplate{}
	require.NoError(t, env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "defaults"}, tmpl))
	assert.Equal(t, ptr.To[int32](3), tmpl.Spec.Template.Spec.Etcd.Replicas)
	assert.Nil(t, tmpl.Spec.Template.Spec.Replicas,
		"a template's replicas stay unset: Cluster API would keep a default over the ClusterClass's patches")
}

func TestRejectsBadInput(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	hcp := func(spec string) string {
		return "apiVersion: controlplane.cluster.x-k8s.io/v1alpha1\nkind: HostedControlPlane\nmetadata: {name: bad}\nspec: " + spec
	}
	tmpl := func(spec string) string {
		return "apiVersion: controlplane.cluster.x-k8s.io/v1alpha1\nkind: HostedControlPlaneTemplate\nmetadata: {name: bad}\nspec: {template: {spec: " + spec + "}}"
	}
	for name, tc := range map[string]struct{ manifest, want string }{
		"version not semver": {
			hcp(`{version: latest}`),
			`spec.version: Invalid value: "latest": must be a semantic version such as v1.36.3`,
		},
		"version missing": {hcp(`{replicas: 2}`), `spec.version: Required value`},
		"etcd replicas even": {
			hcp(`{version: v1.33.0, etcd: {replicas: 2}}`),
			`spec.etcd.replicas: Unsupported value: 2: supported values: "1", "3", "5"`,
		},
		"autoGrow ceiling below volumeSize": {
			hcp(`{version: v1.33.0, etcd: {autoGrow: true, volumeSize: 4Gi, maxVolumeSize: 3Gi}}`),
			`spec.etcd.maxVolumeSize: Invalid value: "3Gi": must be at least volumeSize (4Gi)`,
		},
		"gateway without namespace": {
			hcp(`{version: v1.33.0, gateway: {name: capi}}`),
			"spec.gateway.namespace: Required value: set the namespace of the Gateway",
		},
		"gateway without name": {
			hcp(`{version: v1.33.0, gateway: {namespace: capi-system}}`),
			"spec.gateway.name: Required value: name the Gateway",
		},
		"gateway name malformed": {
			hcp(`{version: v1.33.0, gateway: {name: Capi_GW, namespace: capi-system}}`),
			`spec.gateway.name: Invalid value: "Capi_GW": must be a Gateway name`,
		},
		"gateway and exposure": {
			hcp(`{version: v1.33.0, gateway: {name: capi, namespace: capi-system}, exposure: {type: NodePort}}`),
			"spec.exposure: Forbidden: exposure applies only without a gateway",
		},
		"exposure unknown": {
			hcp(`{version: v1.33.0, exposure: {type: Ingress}}`),
			`spec.exposure.type: Unsupported value: "Ingress": supported values: "LoadBalancer", "NodePort", "ClusterIP"`,
		},
		"ClusterIP without endpoint": {
			hcp(`{version: v1.33.0, exposure: {type: ClusterIP}}`),
			"spec.controlPlaneEndpoint.host: Required value: exposure type ClusterIP needs the address",
		},
		"certSAN malformed": {
			hcp(`{version: v1.33.0, apiServer: {certSANs: ["api example com"]}}`),
			`spec.apiServer.certSANs[0]: Invalid value: "api example com": must be a DNS name`,
		},
		"arg with dashes": {
			hcp(`{version: v1.33.0, deployment: {apiServer: {args: {"--v": "4"}}}}`),
			`spec.deployment.apiServer.args[--v]: Invalid value: "--v": must be a flag name without leading dashes`,
		},
		"backup schedule": {
			hcp(`{version: v1.33.0, etcd: {backup: {schedule: "every night", secret: {name: s3}}}}`),
			`spec.etcd.backup.schedule: Invalid value: "every night": must be a cron schedule`,
		},
		"backup schedule more often than the platform allows": {
			hcp(`{version: v1.33.0, etcd: {backup: {schedule: "@every 1s", secret: {name: s3}}}}`),
			`spec.etcd.backup.schedule: Invalid value: "@every 1s": runs as often as every 1s, and the platform allows a snapshot of a control plane at most every 1h (MIN_BACKUP_INTERVAL)`,
		},
		"backup schedule without a positive interval": {
			hcp(`{version: v1.33.0, etcd: {backup: {schedule: "@every -1h", secret: {name: s3}}}}`),
			`spec.etcd.backup.schedule: Invalid value: "@every -1h": @every needs a positive interval`,
		},
		"backup schedule that never runs": {
			hcp(`{version: v1.33.0, etcd: {backup: {schedule: "0 3 31 2 *", secret: {name: s3}}}}`),
			`spec.etcd.backup.schedule: Invalid value: "0 3 31 2 *": never runs`,
		},
		"CA lifetime too short": {
			hcp(`{version: v1.33.0, certificates: {caCertificateDuration: 1h}}`),
			`spec.certificates.caCertificateDuration: Invalid value: "1h0m0s": must be at least 24h`,
		},
		"root shorter than CA": {
			hcp(`{version: v1.33.0, certificates: {rootCaCertificateDuration: 48h, caCertificateDuration: 96h}}`),
			`spec.certificates.rootCaCertificateDuration: Invalid value: "48h0m0s": must be at least caCertificateDuration`,
		},
		"leaf lifetime too short": {
			hcp(`{version: v1.33.0, certificates: {leafCertificateDuration: 30m}}`),
			`spec.certificates.leafCertificateDuration: Invalid value: "30m0s": must be at least 1h`,
		},
		"leaf outlives its CA": {
			hcp(`{version: v1.33.0, certificates: {caCertificateDuration: 48h, leafCertificateDuration: 72h}}`),
			`spec.certificates.leafCertificateDuration: Invalid value: "72h0m0s": must be at most caCertificateDuration (48h0m0s): the etcd and front-proxy CAs sign leaves`,
		},
		"kubeconfig lifetime too long": {
			hcp(`{version: v1.33.0, certificates: {kubeconfigCertificateDuration: 9000h}}`),
			`spec.certificates.kubeconfigCertificateDuration: Invalid value: "9000h0m0s": must be at most 8760h`,
		},
		"version below the supported range": {
			hcp(`{version: v1.10.0}`),
			`spec.version: Invalid value: "v1.10.0": this release runs Kubernetes v1.31.x to v1.36.x; choose a version in that range`,
		},
		"version v0.0.1":  {hcp(`{version: v0.0.1}`), `spec.version: Invalid value: "v0.0.1": this release runs Kubernetes v1.31.x to v1.36.x`},
		"version v1.99.0": {hcp(`{version: v1.99.0}`), `spec.version: Invalid value: "v1.99.0": this release runs Kubernetes v1.31.x to v1.36.x`},
		"version v2.0.0":  {hcp(`{version: v2.0.0}`), `spec.version: Invalid value: "v2.0.0": this release runs Kubernetes v1.31.x to v1.36.x`},
		"version with build metadata": {
			hcp(`{version: "v1.33.0+evil"}`),
			`spec.version: Invalid value: "v1.33.0+evil": must not carry build metadata (the part after "+")`,
		},
		"etcd volume of an exabyte": {
			hcp(`{version: v1.33.0, etcd: {volumeSize: 1Ei}}`),
			`spec.etcd.volumeSize: Invalid value: "1Ei": must be at most 1Ti`,
		},
		"args without bound": {
			hcp(`{version: v1.33.0, deployment: {apiServer: {args: {` + manyArgs(5000) + `}}}}`),
			"spec.deployment.apiServer.args: Too many: 5000: must have at most 64 items",
		},
		"arg value too long": {
			hcp(`{version: v1.33.0, deployment: {scheduler: {args: {feature-gates: "` + strings.Repeat("A", 5000) + `"}}}}`),
			"spec.deployment.scheduler.args[feature-gates]: Too long: may not be more than 4096 bytes",
		},
		"API server arg the controller owns": {
			hcp(`{version: v1.33.0, deployment: {apiServer: {args: {etcd-servers: "https://elsewhere:2379"}}}}`),
			"spec.deployment.apiServer.args[etcd-servers]: Forbidden: set by the controller (it points the API server at the hosted etcd); remove it",
		},
		"etcd arg the controller owns": {
			hcp(`{version: v1.33.0, etcd: {args: {initial-cluster-state: existing}}}`),
			"spec.etcd.args[initial-cluster-state]: Forbidden: set by the controller (it defines the etcd cluster's membership, which the controller manages); remove it",
		},
		"controller manager arg the controller owns": {
			hcp(`{version: v1.33.0, deployment: {controllerManager: {args: {cluster-signing-key-file: /tmp/key}}}}`),
			"spec.deployment.controllerManager.args[cluster-signing-key-file]: Forbidden: set by the controller (it is the cluster CA the controller keeps, which signs kubelet certificates); remove it",
		},
		"konnectivity agent arg the controller owns": {
			hcp(`{version: v1.33.0, konnectivityClient: {args: {proxy-server-host: elsewhere}}}`),
			"spec.konnectivityClient.args[proxy-server-host]: Forbidden: set by the controller",
		},
		"image registry": {
			hcp(`{version: v1.33.0, deployment: {apiServer: {image: {registry: "https://registry.example.com"}}}}`),
			`spec.deployment.apiServer.image.registry: Invalid value: "https://registry.example.com": must be a registry host with an optional port and path`,
		},
		"image repository": {
			hcp(`{version: v1.33.0, etcd: {image: {repository: "Etcd:3.6"}}}`),
			`spec.etcd.image.repository: Invalid value: "Etcd:3.6": must be a repository path`,
		},
		"image tag": {
			hcp(`{version: v1.33.0, coredns: {image: {tag: "-v1.14 "}}}`),
			`spec.coredns.image.tag: Invalid value: "-v1.14 ": must be an image tag`,
		},
		"backup without a secret": {
			hcp(`{version: v1.33.0, etcd: {backup: {schedule: "@daily"}}}`),
			"spec.etcd.backup.secret.name: Required value: secret is required: name the Secret that holds the S3 endpoint, bucket and credentials",
		},
		"backup with an empty secret": {
			hcp(`{version: v1.33.0, etcd: {backup: {schedule: "@daily", secret: {}}}}`),
			"spec.etcd.backup.secret.name: Required value: secret is required",
		},
		"backup keeping nothing": {
			hcp(`{version: v1.33.0, etcd: {backup: {schedule: "@daily", retentionCount: 0, secret: {name: s3}}}}`),
			"spec.etcd.backup.retentionCount: Invalid value: 0: spec.etcd.backup.retentionCount in body should be greater than or equal to 1",
		},
		"ClusterIP without port": {
			hcp(`{version: v1.33.0, exposure: {type: ClusterIP}, controlPlaneEndpoint: {host: api.example.com}}`),
			"spec.controlPlaneEndpoint.port: Required value: exposure type ClusterIP needs the port you route to the API server Service",
		},
		"NodePort outside the node port range": {
			hcp(`{version: v1.33.0, exposure: {type: NodePort}, controlPlaneEndpoint: {host: 192.0.2.10, port: 6443}}`),
			"spec.controlPlaneEndpoint.port: Invalid value: 6443: with exposure type NodePort the port is the node port the API server Service asks for, so it must be within 30000-32767",
		},
		"template arg the controller owns": {
			tmpl(`{deployment: {scheduler: {args: {leader-elect: "false"}}}}`),
			"spec.template.spec.deployment.scheduler.args[leader-elect]: Forbidden: set by the controller (several replicas run and must not act at once); remove it",
		},
		"replicas zero": {
			hcp(`{version: v1.33.0, replicas: 0}`),
			"spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
		},
		"template with version": {
			tmpl(`{version: v1.33.0}`),
			"spec.template.spec.version: Invalid value: version is not allowed in a template: the Cluster's spec.topology.version sets it; remove it",
		},
		"template certSAN": {
			tmpl(`{apiServer: {certSANs: ["-bad-"]}}`),
			`spec.template.spec.apiServer.certSANs[0]: Invalid value: "-bad-": must be a DNS name`,
		},
		"template gateway": {
			tmpl(`{gateway: {name: capi}}`),
			"spec.template.spec.gateway.namespace: Required value",
		},
		"restore without backup": {
			hcp(`{version: v1.33.0, etcd: {restore: {snapshot: latest}}}`),
			"spec.etcd.restore: Forbidden: needs spec.etcd.backup: the snapshot is read from the store that spec.etcd.backup.secret names; set spec.etcd.backup with that secret",
		},
		"restore of a key that is no snapshot's": {
			hcp(`{version: v1.33.0, etcd: {backup: {schedule: "@daily", secret: {name: s3}}, restore: {snapshot: "prod/snapshot.db"}}}`),
			`spec.etcd.restore.snapshot: Invalid value: "prod/snapshot.db": must be "latest" or an object key as status.etcd.lastBackupKey shows it, such as "ns/name/20260102T030405.000Z-rev1234.db"`,
		},
		"restore from a malformed cluster": {
			hcp(`{version: v1.33.0, etcd: {backup: {schedule: "@daily", secret: {name: s3}}, restore: {fromCluster: prod}}}`),
			`spec.etcd.restore.fromCluster: Invalid value: "prod": must be <namespace>/<name> of the Cluster whose snapshots to look in, such as team-a/prod`,
		},
		"template restore": {
			tmpl(`{etcd: {backup: {schedule: "@daily", secret: {name: s3}}, restore: {snapshot: latest}}}`),
			"spec.template.spec.etcd.restore: Forbidden: not supported yet in a template: a restore is set on the HostedControlPlane of one Cluster, when it is created",
		},
	} {
		t.Run(name, func(t *testing.T) {
			obj, err := create(t, ns, tc.manifest)
			require.Error(t, err)
			assert.True(t, apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(obj.GroupVersionKind())
			err = env.Client.Get(testContext(t), client.ObjectKeyFromObject(obj), got)
			assert.True(t, apierrors.IsNotFound(err), "nothing is stored: %v", err)
		})
	}
}

// manyArgs is n flags in YAML flow style.
func manyArgs(n int) string {
	args := make([]string, n)
	for i := range args {
		args[i] = fmt.Sprintf("flag-%d: %q", i, "x")
	}
	return strings.Join(args, ", ")
}

// base is a valid control plane that update tests start from.
func base(ns, name string) *v1alpha1.HostedControlPlane {
	hcp := &v1alpha1.HostedControlPlane{}
	hcp.Namespace, hcp.Name = ns, name
	hcp.Spec.Version = "v1.33.0"
	hcp.Spec.Gateway = &v1alpha1.GatewayReference{Name: "capi", Namespace: "capi-system"}
	hcp.Spec.Etcd.StorageClassName = ptr.To("fast")
	hcp.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("4Gi"))
	return hcp
}

func TestRejectsBadUpdates(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	for name, tc := range map[string]struct {
		change func(*v1alpha1.HostedControlPlane)
		want   string
		// base adjusts the stored control plane first, when set.
		base func(*v1alpha1.HostedControlPlane)
	}{
		"downgrade": {
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = "v1.32.9" },
			want:   "spec.version: Forbidden: cannot downgrade from v1.33.0 to v1.32.9",
		},
		"patch downgrade": {
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = "v1.33.0-rc.1" },
			want:   "spec.version: Forbidden: cannot downgrade from v1.33.0 to v1.33.0-rc.1",
		},
		"minor skip": {
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = "v1.35.0" },
			want:   "spec.version: Forbidden: cannot skip a minor version from v1.33.0 to v1.35.0: upgrade to v1.34.x first",
		},
		"major": {
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = "v2.0.0" },
			want:   "spec.version: Forbidden: cannot change the major version",
		},
		"etcd shrink": {
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Replicas = ptr.To[int32](1) },
			want:   `spec.etcd.replicas: Forbidden: cannot lower etcd members from 3 to 1 without consent`,
		},
		"volume shrink": {
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("2Gi")) },
			want:   "spec.etcd.volumeSize: Forbidden: cannot shrink etcd volumes from 4Gi to 2Gi",
		},
		"storage class": {
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.StorageClassName = ptr.To("slow") },
			want:   "spec.etcd.storageClassName: Forbidden: cannot change once set (was fast)",
		},
		"gateway": {
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Gateway.Name = "other" },
			want:   "spec.gateway: Forbidden: cannot change once set (was capi-system/capi)",
		},
		"gateway to exposure": {change: func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Gateway = nil
			h.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort}
		}, want: "spec.gateway: Forbidden: the gateway cannot be removed: the control plane is served through the Gateway capi-system/capi and workers and kubeconfigs point at its address; create a new control plane to serve one through a Service"},
		"gateway added": {
			base: func(h *v1alpha1.HostedControlPlane) { h.Spec.Gateway = nil },
			change: func(h *v1alpha1.HostedControlPlane) {
				h.Spec.Gateway = &v1alpha1.GatewayReference{Name: "capi", Namespace: "capi-system"}
			},
			want: "spec.gateway: Forbidden: a gateway cannot be added to a control plane that is already served through a LoadBalancer Service (the default exposure): " +
				"workers and kubeconfigs point at its address; create a new control plane to serve one through a gateway",
		},
		"default exposure changed": {
			base: func(h *v1alpha1.HostedControlPlane) { h.Spec.Gateway = nil },
			change: func(h *v1alpha1.HostedControlPlane) {
				h.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort}
			},
			want: "spec.exposure.type: Forbidden: cannot change once set (was LoadBalancer, the default)",
		},
		"endpoint host": {
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.ControlPlaneEndpoint.Host = "elsewhere.example.com" },
			want:   "spec.controlPlaneEndpoint.host: Forbidden: cannot change once set (was api.example.com): workers and kubeconfigs already point at it",
		},
		"endpoint port": {
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.ControlPlaneEndpoint.Port = 6443 },
			want:   "spec.controlPlaneEndpoint.port: Forbidden: cannot change once set (was 443): workers and kubeconfigs already point at it",
		},
		"volume size removed": {
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.VolumeSize = nil },
			want:   "spec.etcd.volumeSize: Forbidden: cannot be removed once set (was 4Gi): volumes only grow, and without it they would be sized at the default 2Gi; set it to at least 4Gi",
		},
		"upgrade beyond the supported range": {
			base:   func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = "v1.36.3" },
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = "v1.37.0" },
			want:   `spec.version: Invalid value: "v1.37.0": this release runs Kubernetes v1.31.x to v1.36.x; choose a version in that range`,
		},
		"owned arg added": {
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Args = map[string]string{"data-dir": "/tmp"} },
			want:   "spec.etcd.args[data-dir]: Forbidden: set by the controller (it is where the member's volume is mounted); remove it",
		},
		"restore added": {
			change: func(h *v1alpha1.HostedControlPlane) {
				h.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "@daily", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}
				h.Spec.Etcd.Restore = &v1alpha1.EtcdRestore{Snapshot: v1alpha1.LatestSnapshot}
			},
			want: "spec.etcd.restore: Forbidden: cannot be added, changed or removed: etcd is restored only before it first starts; set it when creating the control plane",
		},
		"restore removed": {
			base: func(h *v1alpha1.HostedControlPlane) {
				h.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "@daily", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}
				h.Spec.Etcd.Restore = &v1alpha1.EtcdRestore{}
			},
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Restore = nil },
			want:   "spec.etcd.restore: Forbidden: cannot be added, changed or removed",
		},
		"restore changed": {
			base: func(h *v1alpha1.HostedControlPlane) {
				h.Spec.Etcd.Backup = &v1alpha1.EtcdBackup{Schedule: "@daily", Secret: v1alpha1.EtcdBackupSecret{Name: "s3"}}
				h.Spec.Etcd.Restore = &v1alpha1.EtcdRestore{}
			},
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Restore.FromCluster = "team-a/prod" },
			want:   "spec.etcd.restore: Forbidden: cannot be added, changed or removed",
		},
		"invalid on update too": {
			change: func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Replicas = ptr.To[int32](4) },
			want:   "spec.etcd.replicas: Unsupported value: 4",
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			hcp := base(ns, "")
			hcp.GenerateName = "update-"
			hcp.Spec.ControlPlaneEndpoint.Host, hcp.Spec.ControlPlaneEndpoint.Port = "api.example.com", 443
			if tc.base != nil {
				tc.base(hcp)
			}
			require.NoError(t, env.Client.Create(ctx, hcp))
			before := hcp.DeepCopy()

			err := update(t, hcp, tc.change)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)

			after := &v1alpha1.HostedControlPlane{}
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(before), after))
			assert.Equal(t, before.Generation, after.Generation, "nothing stored changed")
			assert.Equal(t, before.Spec, after.Spec)
		})
	}
}

func TestAllowedUpdates(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	ctx := testContext(t)
	hcp := base(ns, "allowed")
	require.NoError(t, env.Client.Create(ctx, hcp))

	steps := []func(*v1alpha1.HostedControlPlane){
		func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = "v1.33.4" },
		func(h *v1alpha1.HostedControlPlane) { h.Spec.Version = "v1.34.0" },
		func(h *v1alpha1.HostedControlPlane) {
			h.Spec.ControlPlaneEndpoint.Host, h.Spec.ControlPlaneEndpoint.Port = "allowed.example.com", 443
		},
		func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("8Gi")) },
		func(h *v1alpha1.HostedControlPlane) { h.Spec.Etcd.Replicas = ptr.To[int32](5) },
		func(h *v1alpha1.HostedControlPlane) {
			h.Annotations = map[string]string{v1alpha1.AllowEtcdScaleDownAnnotation: "true"}
			h.Spec.Etcd.Replicas = ptr.To[int32](3)
		},
		func(h *v1alpha1.HostedControlPlane) { h.Spec.Replicas = ptr.To[int32](4) },
		func(h *v1alpha1.HostedControlPlane) {
			h.Spec.Etcd.AutoGrow, h.Spec.Etcd.MaxVolumeSize = ptr.To(true), ptr.To(resource.MustParse("16Gi"))
		},
	}
	for i, step := range steps {
		require.NoError(t, update(t, hcp, step), "step %d", i)
	}
	stored := &v1alpha1.HostedControlPlane{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(hcp), stored))
	assert.Equal(t, "v1.34.0", stored.Spec.Version)
	assert.Equal(t, ptr.To[int32](3), stored.Spec.Etcd.Replicas)
	assert.Equal(t, "8Gi", stored.Spec.Etcd.VolumeSize.String())
	assert.Equal(t, "allowed.example.com", stored.Spec.ControlPlaneEndpoint.Host)
}

// With exposure NodePort the user may give the host alone: the controller
// fills in the node port once the Service has one. From then on each part
// stays as it is.
func TestNodePortEndpointIsFilledPartByPart(t *testing.T) {
	parallel(t)
	ctx := testContext(t)
	hcp := base(namespace(t), "nodeport")
	hcp.Spec.Gateway = nil
	hcp.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort}
	hcp.Spec.ControlPlaneEndpoint.Host = "192.0.2.10"
	require.NoError(t, env.Client.Create(ctx, hcp))

	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) { h.Spec.ControlPlaneEndpoint.Port = 31234 }),
		"an unset port may be filled in")
	before := hcp.DeepCopy()
	err := update(t, hcp, func(h *v1alpha1.HostedControlPlane) { h.Spec.ControlPlaneEndpoint.Port = 31235 })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.controlPlaneEndpoint.port: Forbidden: cannot change once set (was 31234)")
	after := &v1alpha1.HostedControlPlane{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(before), after))
	assert.Equal(t, before.Generation, after.Generation, "nothing stored changed")
	assert.Equal(t, clusterv1.APIEndpoint{Host: "192.0.2.10", Port: 31234}, after.Spec.ControlPlaneEndpoint)
}

// warnings records the warnings the API server sends a client.
type warnings struct {
	mu    sync.Mutex
	texts []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

// take returns the distinct warnings so far (a request retried on a
// conflict earns its warnings twice) and forgets them.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	texts := slices.Compact(slices.Sorted(slices.Values(w.texts)))
	w.texts = nil
	return texts
}

// Args that weaken security are allowed, and the client that sets them is
// told why they are a risk, on create and on the update that adds them.
func TestWarningsReachTheClient(t *testing.T) {
	parallel(t)
	ctx := testContext(t)
	recorder := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandlerWithContext = recorder
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	require.NoError(t, err)

	hcp := base(namespace(t), "weakened")
	hcp.Spec.Deployment.APIServer.Args = map[string]string{"authorization-mode": "AlwaysAllow"}
	require.NoError(t, c.Create(ctx, hcp), "weakening is allowed")
	assert.Equal(t, []string{
		`spec.deployment.apiServer.args[authorization-mode]: "AlwaysAllow" weakens security: AlwaysAllow lets every authenticated client do anything; the controller sets Node,RBAC`,
	}, recorder.take())

	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error { // the controller may write it meanwhile
		if err := c.Get(ctx, client.ObjectKeyFromObject(hcp), hcp); err != nil {
			return err
		}
		hcp.Spec.Deployment.ControllerManager.Args = map[string]string{"profiling": "true"}
		return c.Update(ctx, hcp)
	}))
	assert.Equal(t, []string{
		`spec.deployment.controllerManager.args[profiling]: "true" weakens security: it serves profiling data, which the controller turns off`,
	}, recorder.take(), "an update warns about what it adds")
}
