package extension

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/topology"
)

// createGateway creates a Gateway with a TLS passthrough listener on
// *.k8s.example.com:443, and an HTTPS listener before it.
func createGateway(t testing.TB, ns, name string) {
	t.Helper()
	mode := gatewayv1.TLSModePassthrough
	hostname := gatewayv1.Hostname("*.k8s.example.com")
	require.NoError(t, k8s.Create(testContext(t), &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "example", Listeners: []gatewayv1.Listener{
			{Name: "web", Port: 8443, Protocol: gatewayv1.HTTPSProtocolType},
			{Name: "api", Port: 443, Protocol: gatewayv1.TLSProtocolType, Hostname: &hostname, TLS: &gatewayv1.ListenerTLSConfig{Mode: &mode}},
		}},
	}))
}

// stored creates the objects of a YAML manifest in ns and returns them as
// the API server stores them, defaults included: what Cluster API sends.
func stored(t testing.TB, ns, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &obj.Object))
	obj.SetNamespace(ns)
	require.NoError(t, k8s.Create(testContext(t), obj))
	require.NoError(t, k8s.Get(testContext(t), types.NamespacedName{Namespace: ns, Name: obj.GetName()}, obj))
	return obj
}

func sampleTemplateManifest(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.Root, "config", "samples", "hostedcontrolplanetemplate.yaml"))
	require.NoError(t, err)
	return string(data)
}

const testClusterTemplate = `
apiVersion: infrastructure.hostedcp.test/v1alpha1
kind: TestClusterTemplate
metadata: {name: test}
spec:
  template:
    spec:
      controlPlaneEndpoint: {}
`

func topologyVariables(t testing.TB, cluster, ns string, values map[string]any) []runtimehooksv1.Variable {
	t.Helper()
	values["builtin"] = map[string]any{"cluster": map[string]any{"name": cluster, "namespace": ns}}
	var out []runtimehooksv1.Variable
	for name, v := range values {
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		out = append(out, runtimehooksv1.Variable{Name: name, Value: apiextensionsv1.JSON{Raw: raw}})
	}
	return out
}

func holder(cluster, ns, fieldPath string) runtimehooksv1.HolderReference {
	return runtimehooksv1.HolderReference{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Namespace: ns, Name: cluster, FieldPath: fieldPath}
}

func rawObject(t testing.TB, obj *unstructured.Unstructured) runtime.RawExtension {
	t.Helper()
	raw, err := json.Marshal(obj.Object)
	require.NoError(t, err)
	return runtime.RawExtension{Raw: raw}
}

// generatePatchesRequest asks for patches of the stored sample template and
// test infrastructure template, as Cluster API asks.
func generatePatchesRequest(t testing.TB, ns string, values map[string]any) (*runtimehooksv1.GeneratePatchesRequest, *unstructured.Unstructured) {
	t.Helper()
	cp := stored(t, ns, sampleTemplateManifest(t))
	infra := stored(t, ns, testClusterTemplate)
	return &runtimehooksv1.GeneratePatchesRequest{
		Variables: topologyVariables(t, "demo", ns, values),
		Items: []runtimehooksv1.GeneratePatchesRequestItem{
			{UID: "infra", HolderReference: holder("demo", ns, "spec.infrastructureRef"), Object: rawObject(t, infra)},
			{UID: "cp", HolderReference: holder("demo", ns, "spec.controlPlaneRef"), Object: rawObject(t, cp)},
		},
	}, cp
}

// The running extension patches a template as the API server stores it,
// takes the endpoint from a real Gateway, and the patched template makes a
// HostedControlPlane that admission accepts.
func TestGeneratePatchesOnStoredTemplates(t *testing.T) {
	ns, gwNS := namespace(t), namespace(t)
	createGateway(t, gwNS, "edge")
	req, cp := generatePatchesRequest(t, ns, map[string]any{
		topology.VarGatewayName: "edge", topology.VarGatewayNamespace: gwNS, topology.VarControlPlaneReplicas: 3,
		topology.VarEtcdReplicas: 5, topology.VarEtcdVolumeSize: "4Gi",
	})
	resp := &runtimehooksv1.GeneratePatchesResponse{}
	callHook(t, runtimehooksv1.GeneratePatches, topology.GeneratePatchesHandler, req, resp)
	require.Equal(t, runtimehooksv1.ResponseStatusSuccess, resp.Status, resp.Message)
	patches := map[string][]byte{}
	for _, item := range resp.Items {
		patches[string(item.UID)] = item.Patch
	}
	assert.JSONEq(t, `[
		{"op":"replace","path":"/spec/template/spec/etcd/replicas","value":5},
		{"op":"add","path":"/spec/template/spec/etcd/volumeSize","value":"4Gi"},
		{"op":"replace","path":"/spec/template/spec/gateway/name","value":"edge"},
		{"op":"replace","path":"/spec/template/spec/gateway/namespace","value":"`+gwNS+`"},
		{"op":"add","path":"/spec/template/spec/replicas","value":3}]`, sortOps(t, patches["cp"]))
	assert.JSONEq(t, fmt.Sprintf(`[
		{"op":"add","path":"/spec/template/spec/controlPlaneEndpoint/host","value":"demo.%s.k8s.example.com"},
		{"op":"add","path":"/spec/template/spec/controlPlaneEndpoint/port","value":443}]`, ns), sortOps(t, patches["infra"]))

	spec := patchedSpec(t, cp, patches["cp"])
	spec["version"] = "v1.35.2"
	hcp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1", "kind": "HostedControlPlane",
		"metadata": map[string]any{"name": "from-template", "namespace": ns}, "spec": spec,
	}}
	require.NoError(t, k8s.Create(testContext(t), hcp), "admission accepts the patched template")
}

// sortOps orders JSON patch operations by path: their order is not part of
// the result.
func sortOps(t testing.TB, patch []byte) string {
	t.Helper()
	var ops []map[string]any
	require.NoError(t, json.Unmarshal(patch, &ops))
	slices.SortFunc(ops, func(a, b map[string]any) int { return strings.Compare(a["path"].(string), b["path"].(string)) })
	out, err := json.Marshal(ops)
	require.NoError(t, err)
	return string(out)
}

func patchedSpec(t testing.TB, template *unstructured.Unstructured, patch []byte) map[string]any {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patch)
	require.NoError(t, err)
	doc, err := p.Apply(rawObject(t, template).Raw)
	require.NoError(t, err)
	var out unstructured.Unstructured
	require.NoError(t, json.Unmarshal(doc, &out.Object))
	spec, _, err := unstructured.NestedMap(out.Object, "spec", "template", "spec")
	require.NoError(t, err)
	return spec
}

// ValidateTopology reads real Gateways: a missing one and one without a
// wildcard TLS passthrough listener are refused with messages naming the
// variable.
func TestValidateTopologyReadsGateways(t *testing.T) {
	ns, gwNS := namespace(t), namespace(t)
	createGateway(t, gwNS, "edge")
	https := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: gwNS, Name: "web"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "example", Listeners: []gatewayv1.Listener{
			{Name: "web", Port: 443, Protocol: gatewayv1.HTTPSProtocolType},
		}},
	}
	require.NoError(t, k8s.Create(testContext(t), https))
	cp := stored(t, ns, sampleTemplateManifest(t))
	for gateway, want := range map[string]string{
		"edge": "",
		"web": fmt.Sprintf(`spec.topology.variables[gatewayName]: Invalid value: "%s/web": the Gateway %s/web has no listener with protocol TLS, `+
			`tls.mode Passthrough and a wildcard hostname such as *.k8s.example.com`, gwNS, gwNS),
		"none": fmt.Sprintf(`spec.topology.variables[gatewayName]: Invalid value: "%s/none": no Gateway %s/none exists`, gwNS, gwNS),
	} {
		values := map[string]any{topology.VarGatewayName: gateway, topology.VarGatewayNamespace: gwNS}
		template := cp.DeepCopy()
		require.NoError(t, unstructured.SetNestedStringMap(template.Object, map[string]string{"name": gateway, "namespace": gwNS}, "spec", "template", "spec", "gateway"))
		resp := &runtimehooksv1.ValidateTopologyResponse{}
		callHook(t, runtimehooksv1.ValidateTopology, topology.ValidateTopologyHandler, &runtimehooksv1.ValidateTopologyRequest{
			Variables: topologyVariables(t, "demo", ns, values),
			Items:     []*runtimehooksv1.ValidateTopologyRequestItem{{HolderReference: holder("demo", ns, "spec.controlPlaneRef"), Object: rawObject(t, template)}},
		}, resp)
		assert.Equal(t, want, resp.Message, gateway)
		assert.Equal(t, want == "", resp.Status == runtimehooksv1.ResponseStatusSuccess, gateway)
	}
}
