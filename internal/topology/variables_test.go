package topology

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

// DiscoverVariables publishes every variable, typed, documented and bounded,
// with defaults that satisfy their own bounds.
func TestDiscoverVariablesPublishesTypedDocumentedVariables(t *testing.T) {
	resp := &runtimehooksv1.DiscoverVariablesResponse{}
	handlers(t).DiscoverVariables(context.Background(), &runtimehooksv1.DiscoverVariablesRequest{}, resp)
	require.Equal(t, runtimehooksv1.ResponseStatusSuccess, resp.Status)
	var names []string
	for _, v := range resp.Variables {
		names = append(names, v.Name)
		assert.False(t, *v.Required, "%s is optional: the template has a value", v.Name)
		checkSchema(t, v.Name, v.Schema.OpenAPIV3Schema)
	}
	assert.Equal(t, []string{
		VarControlPlaneReplicas, VarGatewayName, VarGatewayNamespace, VarCertSANs, VarEtcdReplicas, VarEtcdVolumeSize, VarEtcdBackup,
	}, names)
}

func checkSchema(t *testing.T, name string, s clusterv1.JSONSchemaProps) {
	t.Helper()
	assert.NotEmpty(t, s.Description, "%s has a description", name)
	switch s.Type {
	case "integer":
		require.NotNil(t, s.Minimum, "%s has a minimum", name)
		require.NotNil(t, s.Maximum, "%s has a maximum", name)
		if s.Default != nil {
			var n int64
			require.NoError(t, json.Unmarshal(s.Default.Raw, &n))
			assert.True(t, n >= *s.Minimum && n <= *s.Maximum, "%s default %d within bounds", name, n)
		}
	case "string":
		require.NotNil(t, s.MaxLength, "%s has a maximum length", name)
		if s.Pattern != "" && s.Example != nil {
			var example string
			require.NoError(t, json.Unmarshal(s.Example.Raw, &example))
			assert.Regexp(t, regexp.MustCompile(s.Pattern), example, "%s example matches its pattern", name)
		}
	case "array":
		require.NotNil(t, s.MaxItems, "%s has a maximum number of items", name)
		checkSchema(t, name+"[]", clusterv1.JSONSchemaProps{Description: "item", Type: s.Items.Type, MaxLength: s.Items.MaxLength})
	case "object":
		for field, p := range s.Properties {
			checkSchema(t, name+"."+field, p)
		}
	default:
		t.Errorf("%s has type %q", name, s.Type)
	}
}

// The volume size pattern accepts what Kubernetes accepts as a quantity.
func TestVolumeSizePatternMatchesQuantities(t *testing.T) {
	pattern := regexp.MustCompile(quantityPattern)
	for _, ok := range []string{"2Gi", "512Mi", "1.5Gi", "10G", "1073741824"} {
		assert.Regexp(t, pattern, ok)
		_, err := resource.ParseQuantity(ok)
		assert.NoError(t, err, ok)
	}
	for _, bad := range []string{"2 Gi", "2GB", "-1Gi", "Gi", ""} {
		assert.NotRegexp(t, pattern, bad)
	}
}

func TestParseValues(t *testing.T) {
	raw := func(s string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(s)} }
	v, err := ParseValues(map[string]apiextensionsv1.JSON{
		VarControlPlaneReplicas: raw(`3`), VarGatewayName: raw(`"capi"`), VarCertSANs: raw(`["a.example.com"]`),
		VarEtcdReplicas: raw(`5`), VarEtcdVolumeSize: raw(`"4Gi"`),
		VarEtcdBackup: raw(`{"schedule":"@daily","retentionCount":3,"secretName":"s3"}`),
		"builtin":     raw(`{"cluster":{"name":"demo"}}`), "clusterClassOwn": raw(`true`),
	})
	require.NoError(t, err)
	q := resource.MustParse("4Gi")
	assert.Equal(t, Values{
		ControlPlaneReplicas: ptr.To[int32](3), GatewayName: "capi", CertSANs: []string{"a.example.com"},
		EtcdReplicas: ptr.To[int32](5), EtcdVolumeSize: &q,
		EtcdBackup: &Backup{Schedule: "@daily", RetentionCount: ptr.To[int32](3), SecretName: "s3"},
	}, v)

	for want, vars := range map[string]map[string]apiextensionsv1.JSON{
		`variable controlPlaneReplicas: cannot read "2"`:            {VarControlPlaneReplicas: raw(`"2"`)},
		`variable certSANs: cannot read "api.example.com"`:          {VarCertSANs: raw(`"api.example.com"`)},
		`variable etcdVolumeSize: "lots" is not a size such as 2Gi`: {VarEtcdVolumeSize: raw(`"lots"`)},
		`variable etcdBackup: cannot read ["@daily"]`:               {VarEtcdBackup: raw(`["@daily"]`)},
		`variable gatewayName: cannot read {"name":"capi"}`:         {VarGatewayName: raw(`{"name":"capi"}`)},
	} {
		_, err := ParseValues(vars)
		assert.ErrorContains(t, err, want)
	}
}

func TestSetEndpoint(t *testing.T) {
	endpoint := clusterv1.APIEndpoint{Host: "demo.team-a.k8s.example.com", Port: 443}
	template := func(spec string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		require.NoError(t, json.Unmarshal([]byte(`{"kind":"ExampleClusterTemplate","metadata":{"name":"x"},"spec":{"template":{"spec":`+spec+`}}}`), &u.Object))
		return u
	}

	withField := template(`{"controlPlaneEndpoint":{"host":"","port":0},"region":"north"}`)
	set, err := SetEndpoint(withField, endpoint)
	require.NoError(t, err)
	assert.True(t, set)
	assert.Equal(t, map[string]any{"controlPlaneEndpoint": map[string]any{"host": "demo.team-a.k8s.example.com", "port": int64(443)}, "region": "north"},
		withField.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"])

	nullField := template(`{"controlPlaneEndpoint":null}`)
	set, err = SetEndpoint(nullField, endpoint)
	require.NoError(t, err)
	assert.True(t, set, "a null endpoint is a field to fill")

	without := template(`{"region":"north"}`)
	set, err = SetEndpoint(without, endpoint)
	require.NoError(t, err)
	assert.False(t, set, "a template without the field is left alone")
	assert.Equal(t, map[string]any{"region": "north"}, without.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"])

	_, err = SetEndpoint(template(`{"controlPlaneEndpoint":"api:443"}`), endpoint)
	assert.ErrorContains(t, err, "ExampleClusterTemplate x: spec.template.spec.controlPlaneEndpoint is string, not an object")
}
