package topology

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// The Cluster every request in these tests is about.
const (
	clusterName      = "demo"
	clusterNamespace = "team-a"
)

// sampleTemplate is the HostedControlPlaneTemplate users start from
// (config/samples), as JSON, as the API server stores it and Cluster API
// sends it: with the defaults of its CRD's schema.
func sampleTemplate(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "hostedcontrolplanetemplate.yaml"))
	require.NoError(t, err)
	obj := map[string]any{}
	require.NoError(t, yaml.Unmarshal(data, &obj))
	structuraldefaulting.Default(obj, templateSchema(t))
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	return raw
}

// templateSchema is the structural schema of the HostedControlPlaneTemplate
// CRD, which holds its defaults.
func templateSchema(t *testing.T) *structuralschema.Structural {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "controlplane.cluster.x-k8s.io_hostedcontrolplanetemplates.yaml"))
	require.NoError(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, yaml.Unmarshal(data, crd))
	internal := &apiextensions.CustomResourceValidation{}
	require.NoError(t, apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(crd.Spec.Versions[0].Schema, internal, nil))
	schema, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	require.NoError(t, err)
	return schema
}

// infraTemplate is an infrastructure cluster template that follows the
// contract and carries spec.template.spec.controlPlaneEndpoint.
const infraTemplate = `{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"ExampleClusterTemplate",` +
	`"metadata":{"name":"example","namespace":"team-a"},"spec":{"template":{"spec":{"controlPlaneEndpoint":{"host":"","port":0},"region":"north"}}}}`

// handlers reads Gateways from a controller-runtime fake client: unit tests
// run without an API server. test/envtest/extension runs the same hooks
// against a real one.
func handlers(t *testing.T, gateways ...*gatewayv1.Gateway) *Handlers {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, gatewayv1.Install(scheme))
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, gw := range gateways {
		b = b.WithObjects(gw)
	}
	return NewHandlers(b.Build())
}

// passthroughGateway is a Gateway that can serve hosted API servers on port
// 443 under *.k8s.example.com.
func passthroughGateway(name types.NamespacedName) *gatewayv1.Gateway {
	mode := gatewayv1.TLSModePassthrough
	hostname := gatewayv1.Hostname("*.k8s.example.com")
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: "example",
			Listeners: []gatewayv1.Listener{
				{Name: "https", Port: 8443, Protocol: gatewayv1.HTTPSProtocolType},
				{Name: "tls", Port: 443, Protocol: gatewayv1.TLSProtocolType, Hostname: &hostname, TLS: &gatewayv1.ListenerTLSConfig{Mode: &mode}},
			},
		},
	}
}

// variables encodes values the way Cluster API sends them, with the builtin
// variable describing the Cluster.
func variables(t *testing.T, values map[string]any) []runtimehooksv1.Variable {
	t.Helper()
	values["builtin"] = map[string]any{"cluster": map[string]any{"name": clusterName, "namespace": clusterNamespace}}
	var out []runtimehooksv1.Variable
	for name, v := range values {
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		out = append(out, runtimehooksv1.Variable{Name: name, Value: apiextensionsv1.JSON{Raw: raw}})
	}
	return out
}

func holder(fieldPath string) runtimehooksv1.HolderReference {
	return runtimehooksv1.HolderReference{
		APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Namespace: clusterNamespace, Name: clusterName, FieldPath: fieldPath,
	}
}

// applyPatch applies a JSON patch as Cluster API does.
func applyPatch(t *testing.T, doc []byte, patch string) []byte {
	t.Helper()
	p, err := jsonpatch.DecodePatch([]byte(patch))
	require.NoError(t, err)
	out, err := p.Apply(doc)
	require.NoError(t, err)
	return out
}
