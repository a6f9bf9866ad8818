package topology

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// generate runs GeneratePatches on the sample HostedControlPlaneTemplate and
// an infrastructure cluster template, and returns each one's JSON patch.
func generate(t *testing.T, h *Handlers, values map[string]any) (controlPlane, infrastructure string) {
	t.Helper()
	req := &runtimehooksv1.GeneratePatchesRequest{
		Variables: variables(t, values),
		Items: []runtimehooksv1.GeneratePatchesRequestItem{
			{UID: "infra", HolderReference: holder("spec.infrastructureRef"), Object: runtime.RawExtension{Raw: []byte(infraTemplate)}},
			{UID: "cp", HolderReference: holder("spec.controlPlaneRef"), Object: runtime.RawExtension{Raw: sampleTemplate(t)}},
		},
	}
	resp := &runtimehooksv1.GeneratePatchesResponse{}
	h.GeneratePatches(context.Background(), req, resp)
	require.Equal(t, runtimehooksv1.ResponseStatusSuccess, resp.Status, resp.Message)
	patches := map[string]string{}
	for _, item := range resp.Items {
		assert.Equal(t, runtimehooksv1.JSONPatchType, item.PatchType)
		patches[string(item.UID)] = sortedPatch(t, item.Patch)
	}
	return patches["cp"], patches["infra"]
}

// sortedPatch orders the operations by path: the patch helper diffs maps,
// whose order varies, and operations on distinct paths commute.
func sortedPatch(t *testing.T, patch []byte) string {
	t.Helper()
	var ops []map[string]any
	require.NoError(t, json.Unmarshal(patch, &ops))
	slices.SortFunc(ops, func(a, b map[string]any) int { return strings.Compare(a["path"].(string), b["path"].(string)) })
	out, err := json.Marshal(ops)
	require.NoError(t, err)
	return string(out)
}

// Each variable lands on its field of the sample template, and nothing else
// changes. The sample names the Gateway capi-system/capi, which the fake
// API holds here, so every request also sets the infrastructure endpoint.
func TestGeneratePatchesSetEachVariable(t *testing.T) {
	const endpoint = `[{"op":"replace","path":"/spec/template/spec/controlPlaneEndpoint/host","value":"demo.team-a.k8s.example.com"},` +
		`{"op":"replace","path":"/spec/template/spec/controlPlaneEndpoint/port","value":443}]`
	h := handlers(t,
		passthroughGateway(types.NamespacedName{Namespace: "capi-system", Name: "capi"}),
		passthroughGateway(types.NamespacedName{Namespace: "edge", Name: "shared"}),
		passthroughGateway(types.NamespacedName{Namespace: clusterNamespace, Name: "own"}))
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"no variables", map[string]any{}, `[]`},
		{
			VarControlPlaneReplicas,
			map[string]any{VarControlPlaneReplicas: 3},
			`[{"op":"add","path":"/spec/template/spec/replicas","value":3}]`,
		},
		{
			VarGatewayName + " and " + VarGatewayNamespace,
			map[string]any{VarGatewayName: "shared", VarGatewayNamespace: "edge"},
			`[{"op":"replace","path":"/spec/template/spec/gateway/name","value":"shared"},` +
				`{"op":"replace","path":"/spec/template/spec/gateway/namespace","value":"edge"}]`,
		},
		{
			VarGatewayName + " alone takes the Cluster's namespace",
			map[string]any{VarGatewayName: "own"},
			`[{"op":"replace","path":"/spec/template/spec/gateway/name","value":"own"},` +
				`{"op":"replace","path":"/spec/template/spec/gateway/namespace","value":"team-a"}]`,
		},
		{
			VarCertSANs,
			map[string]any{VarCertSANs: []string{"k8s.example.org", "192.0.2.10"}},
			`[{"op":"replace","path":"/spec/template/spec/apiServer/certSANs/0","value":"k8s.example.org"},` +
				`{"op":"add","path":"/spec/template/spec/apiServer/certSANs/1","value":"192.0.2.10"}]`,
		},
		{
			VarEtcdReplicas,
			map[string]any{VarEtcdReplicas: 5},
			`[{"op":"replace","path":"/spec/template/spec/etcd/replicas","value":5}]`,
		},
		{
			VarEtcdVolumeSize,
			map[string]any{VarEtcdVolumeSize: "4Gi"},
			`[{"op":"add","path":"/spec/template/spec/etcd/volumeSize","value":"4Gi"}]`,
		},
		{
			VarEtcdBackup,
			map[string]any{VarEtcdBackup: map[string]any{"schedule": "0 3 * * *", "retentionCount": 14, "secretName": "s3", "secretNamespace": "backups"}},
			`[{"op":"add","path":"/spec/template/spec/etcd/backup","value":{"schedule":"0 3 * * *","retentionCount":14,"secret":{"name":"s3","namespace":"backups"}}}]`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			controlPlane, infrastructure := generate(t, h, tc.values)
			assert.JSONEq(t, tc.want, controlPlane)
			assert.JSONEq(t, endpoint, infrastructure)
		})
	}
}

// Applied as Cluster API applies them, the patches give the template every
// value at once.
func TestGeneratePatchesApplyToTheSampleTemplate(t *testing.T) {
	h := handlers(t, passthroughGateway(types.NamespacedName{Namespace: "edge", Name: "shared"}))
	controlPlane, _ := generate(t, h, map[string]any{
		VarControlPlaneReplicas: 3, VarGatewayName: "shared", VarGatewayNamespace: "edge",
		VarCertSANs: []string{"k8s.example.org"}, VarEtcdReplicas: 5, VarEtcdVolumeSize: "4Gi",
		VarEtcdBackup: map[string]any{"schedule": "@daily", "secretName": "s3"},
	})
	patched := applyPatch(t, sampleTemplate(t), controlPlane)
	var got struct {
		Spec struct {
			Template struct {
				Spec json.RawMessage `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	require.NoError(t, json.Unmarshal(patched, &got))
	assert.JSONEq(t, `{
		"replicas": 3,
		"gateway": {"name": "shared", "namespace": "edge"},
		"apiServer": {"certSANs": ["k8s.example.org"]},
		"etcd": {"replicas": 5, "volumeSize": "4Gi", "backup": {"schedule": "@daily", "secret": {"name": "s3"}}},
		"deployment": {"apiServer": {"konnectivity": {}}, "controllerManager": {}, "scheduler": {}},
		"konnectivityClient": {}, "coredns": {}, "kubeProxy": {}, "certificates": {}
	}`, string(got.Spec.Template.Spec))
}

// Without a usable Gateway the endpoint stays as the template has it, and
// the control plane is still patched: ValidateTopology reports the Gateway.
func TestGeneratePatchesWithoutUsableGatewayLeaveTheEndpoint(t *testing.T) {
	noListener := passthroughGateway(types.NamespacedName{Namespace: "capi-system", Name: "capi"})
	noListener.Spec.Listeners = noListener.Spec.Listeners[:1]
	for name, h := range map[string]*Handlers{
		"missing Gateway":               handlers(t),
		"no TLS passthrough listener":   handlers(t, noListener),
		"wildcard-less TLS passthrough": handlers(t, withHostname(passthroughGateway(types.NamespacedName{Namespace: "capi-system", Name: "capi"}), "k8s.example.com")),
	} {
		t.Run(name, func(t *testing.T) {
			controlPlane, infrastructure := generate(t, h, map[string]any{VarControlPlaneReplicas: 4})
			assert.JSONEq(t, `[{"op":"add","path":"/spec/template/spec/replicas","value":4}]`, controlPlane)
			assert.JSONEq(t, `[]`, infrastructure)
		})
	}
}

func withHostname(gw *gatewayv1.Gateway, hostname string) *gatewayv1.Gateway {
	h := gatewayv1.Hostname(hostname)
	gw.Spec.Listeners[1].Hostname = &h
	return gw
}

// A value that cannot be read fails the request with the variable's name.
func TestGeneratePatchesNameTheBadVariable(t *testing.T) {
	req := &runtimehooksv1.GeneratePatchesRequest{
		Variables: variables(t, map[string]any{VarEtcdReplicas: "three"}),
		Items: []runtimehooksv1.GeneratePatchesRequestItem{
			{UID: "cp", HolderReference: holder("spec.controlPlaneRef"), Object: runtime.RawExtension{Raw: sampleTemplate(t)}},
		},
	}
	resp := &runtimehooksv1.GeneratePatchesResponse{}
	handlers(t).GeneratePatches(context.Background(), req, resp)
	assert.Equal(t, runtimehooksv1.ResponseStatusFailure, resp.Status)
	assert.Contains(t, resp.Message, `variable etcdReplicas: cannot read "three"`)
}

// controlPlaneReplicas is refused where Cluster API would ignore it: it
// keeps the control plane's replicas from the topology or the template.
func TestGeneratePatchesRefuseReplicasClusterAPIWouldIgnore(t *testing.T) {
	withReplicas := applyPatch(t, sampleTemplate(t), `[{"op":"add","path":"/spec/template/spec/replicas","value":2}]`)
	topologyReplicas, err := json.Marshal(map[string]any{"controlPlane": map[string]any{"replicas": 3}})
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		template []byte
		itemVars []runtimehooksv1.Variable
		want     string
	}{
		"the template sets replicas": {withReplicas, nil, "variable controlPlaneReplicas cannot take effect: Cluster API keeps the control plane's replicas " +
			"from HostedControlPlaneTemplate default/hosted, which sets spec.template.spec.replicas; remove them from the template"},
		"the topology sets replicas": {
			sampleTemplate(t),
			[]runtimehooksv1.Variable{{Name: "builtin", Value: apiextensionsv1.JSON{Raw: topologyReplicas}}},
			"variable controlPlaneReplicas cannot take effect: Cluster API keeps the control plane's replicas " +
				"from Cluster.spec.topology.controlPlane.replicas, which is set; set only one of them",
		},
	} {
		t.Run(name, func(t *testing.T) {
			req := &runtimehooksv1.GeneratePatchesRequest{
				Variables: variables(t, map[string]any{VarControlPlaneReplicas: 4}),
				Items: []runtimehooksv1.GeneratePatchesRequestItem{{
					UID: "cp", HolderReference: holder("spec.controlPlaneRef"), Object: runtime.RawExtension{Raw: tc.template}, Variables: tc.itemVars,
				}},
			}
			resp := &runtimehooksv1.GeneratePatchesResponse{}
			handlers(t).GeneratePatches(context.Background(), req, resp)
			assert.Equal(t, runtimehooksv1.ResponseStatusFailure, resp.Status)
			assert.Equal(t, tc.want, resp.Message)
		})
	}
}
