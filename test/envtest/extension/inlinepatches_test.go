package extension

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// A template that sets nothing but the gateway, as ClusterClass authors
// write them for inline patches.
const bareTemplate = `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlaneTemplate
metadata: {name: bare}
spec:
  template:
    spec:
      gateway: {name: default, namespace: capi-system}
`

// A v1beta1 ClusterClass with inline JSON patches only, no extension: each
// "add" needs its parent in the stored template.
const inlineClusterClass = `
apiVersion: cluster.x-k8s.io/v1beta1
kind: ClusterClass
metadata: {name: inline}
spec:
  controlPlane:
    ref: {apiVersion: controlplane.cluster.x-k8s.io/v1alpha1, kind: HostedControlPlaneTemplate, name: bare}
  infrastructure:
    ref: {apiVersion: infrastructure.hostedcp.test/v1alpha1, kind: TestClusterTemplate, name: test}
  variables:
  - {name: replicas, required: true, schema: {openAPIV3Schema: {type: integer}}}
  - {name: gatewayName, required: true, schema: {openAPIV3Schema: {type: string}}}
  - {name: certSANs, required: true, schema: {openAPIV3Schema: {type: array, items: {type: string}}}}
  - {name: etcdVolumeSize, required: true, schema: {openAPIV3Schema: {type: string}}}
  - {name: verbosity, required: true, schema: {openAPIV3Schema: {type: string}}}
  patches:
  - name: hosted
    definitions:
    - selector:
        apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
        kind: HostedControlPlaneTemplate
        matchResources: {controlPlane: true}
      jsonPatches:
      - {op: add, path: /spec/template/spec/replicas, valueFrom: {variable: replicas}}
      - {op: add, path: /spec/template/spec/gateway/name, valueFrom: {variable: gatewayName}}
      - {op: add, path: /spec/template/spec/apiServer/certSANs, valueFrom: {variable: certSANs}}
      - {op: add, path: /spec/template/spec/etcd/volumeSize, valueFrom: {variable: etcdVolumeSize}}
      - {op: add, path: /spec/template/spec/deployment/apiServer/args, valueFrom: {template: "{v: \"{{ .verbosity }}\"}"}}
      - {op: add, path: /spec/template/spec/deployment/apiServer/konnectivity/args, valueFrom: {template: "{v: \"{{ .verbosity }}\"}"}}
      - {op: add, path: /spec/template/spec/deployment/controllerManager/replicas, value: 2}
      - {op: add, path: /spec/template/spec/deployment/scheduler/priorityClassName, value: system-cluster-critical}
      - {op: add, path: /spec/template/spec/konnectivityClient/replicas, value: 3}
      - {op: add, path: /spec/template/spec/coredns/replicas, value: 4}
      - {op: add, path: /spec/template/spec/kubeProxy/disabled, value: true}
      - {op: add, path: /spec/template/spec/certificates/caCertificateDuration, value: 8760h}
`

const inlineCluster = `
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: inline}
spec:
  clusterNetwork:
    services: {cidrBlocks: [10.128.0.0/12]}
    pods: {cidrBlocks: [192.168.0.0/16]}
  topology:
    class: inline
    version: v1.36.3
    variables:
    - {name: replicas, value: 3}
    - {name: gatewayName, value: capi}
    - {name: certSANs, value: [api.example.com, 192.0.2.10]}
    - {name: etcdVolumeSize, value: 4Gi}
    - {name: verbosity, value: "4"}
`

// The real Cluster API topology controller applies a v1beta1 ClusterClass's
// inline patches to a template that sets only the gateway: the
// HostedControlPlane carries every patched value and the topology is
// reconciled.
func TestInlinePatchesOnBareTemplate(t *testing.T) {
	capiManager(t)
	ctx := testContext(t)
	ns := namespace(t)
	template := stored(t, ns, bareTemplate)
	for _, parent := range []string{"apiServer", "etcd", "deployment", "konnectivityClient", "coredns", "kubeProxy", "certificates"} {
		_, found, err := unstructured.NestedFieldNoCopy(template.Object, "spec", "template", "spec", parent)
		require.NoError(t, err)
		assert.True(t, found, "the stored template has %s for patches to add into", parent)
	}
	_, found, _ := unstructured.NestedFieldNoCopy(template.Object, "spec", "template", "spec", "replicas")
	assert.False(t, found, "replicas stays unset in the template, so the topology decides")
	stored(t, ns, testClusterTemplate)
	stored(t, ns, inlineClusterClass)
	stored(t, ns, inlineCluster)
	key := types.NamespacedName{Namespace: ns, Name: "inline"}

	hcp := &v1alpha1.HostedControlPlane{}
	eventually(t, time.Minute, "the topology creates the HostedControlPlane", func() error {
		return getControlPlane(ctx, key, hcp)
	})
	spec := hcp.Spec
	assert.Equal(t, "v1.36.3", spec.Version)
	assert.Equal(t, ptr.To[int32](3), spec.Replicas)
	assert.Equal(t, &v1alpha1.GatewayReference{Name: "capi", Namespace: "capi-system"}, spec.Gateway)
	assert.Equal(t, []string{"api.example.com", "192.0.2.10"}, spec.APIServer.CertSANs)
	assert.Equal(t, "4Gi", spec.Etcd.VolumeSize.String())
	assert.Equal(t, ptr.To[int32](3), spec.Etcd.Replicas, "the schema's default")
	assert.Equal(t, map[string]string{"v": "4"}, spec.Deployment.APIServer.Args)
	assert.Equal(t, map[string]string{"v": "4"}, spec.Deployment.APIServer.Konnectivity.Args)
	assert.Equal(t, ptr.To[int32](2), spec.Deployment.ControllerManager.Replicas)
	assert.Equal(t, "system-cluster-critical", spec.Deployment.Scheduler.PriorityClassName)
	assert.Equal(t, ptr.To[int32](3), spec.KonnectivityClient.Replicas)
	assert.Equal(t, ptr.To[int32](4), spec.CoreDNS.Replicas)
	assert.Equal(t, ptr.To(true), spec.KubeProxy.Disabled)
	assert.Equal(t, &metav1.Duration{Duration: 8760 * time.Hour}, spec.Certificates.CACertificateDuration)

	eventually(t, time.Minute, "TopologyReconciled is true", func() error {
		cluster := &clusterv1.Cluster{}
		if err := k8s.Get(ctx, key, cluster); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cluster.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("TopologyReconciled is %+v", c)
		}
		return nil
	})
}
