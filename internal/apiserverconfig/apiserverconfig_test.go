package apiserverconfig

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/apis/apiserver/validation"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/audit/policy"
	authenticationcel "k8s.io/apiserver/pkg/authentication/cel"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

var providers = map[string]v1alpha1.OIDCProvider{
	"https://sso.example.com": {
		Audiences:            []string{"demo", "kubectl"},
		ClaimMappings:        v1alpha1.OIDCClaimMappings{Username: `"oidc:" + claims.sub`, Groups: "claims.groups"},
		ClaimValidationRules: []v1alpha1.OIDCClaimValidationRule{{Expression: "claims.email_verified == true", Message: "email must be verified"}},
	},
	"https://a.example.com/realms/k8s": {Audiences: []string{"demo"}, ClaimMappings: v1alpha1.OIDCClaimMappings{Username: "claims.preferred_username"}},
}

// The file decodes strictly, as the API server decodes it, and passes the
// API server's validation; its authenticators come in issuer order.
func TestAuthenticationLoadsAsTheAPIServerLoadsIt(t *testing.T) {
	data, err := AuthenticationYAML(providers, nil)
	require.NoError(t, err)
	decoded := &apiserver.AuthenticationConfiguration{}
	_, gvk, err := serializer.NewCodecFactory(authnScheme, serializer.EnableStrict).UniversalDecoder().Decode(data, nil, decoded)
	require.NoError(t, err, string(data))
	assert.Equal(t, "apiserver.config.k8s.io/v1, Kind=AuthenticationConfiguration", gvk.String())
	assert.Empty(t, validation.ValidateAuthenticationConfiguration(authenticationcel.NewDefaultCompiler(), decoded, nil))
	require.Len(t, decoded.JWT, 2)
	assert.Equal(t, "https://a.example.com/realms/k8s", decoded.JWT[0].Issuer.URL)
	sso := decoded.JWT[1]
	assert.Equal(t, apiserver.AudienceMatchPolicyMatchAny, sso.Issuer.AudienceMatchPolicy, "two audiences, any one will do")
	assert.Equal(t, `"oidc:" + claims.sub`, sso.ClaimMappings.Username.Expression)
	assert.Equal(t, "claims.groups", sso.ClaimMappings.Groups.Expression)
	assert.Equal(t, "email must be verified", sso.ClaimValidationRules[0].Message)
}

// With the management cluster's service accounts, their authenticator
// comes last and loads, and every OIDC provider refuses their prefix; it
// cannot be the API server's own issuer.
func TestManagementAuthenticatorLoads(t *testing.T) {
	m := &Management{
		Issuer: "https://management.example.com", DiscoveryURL: "https://127.0.0.1:6446/.well-known/openid-configuration",
		Audience: "controlplane.cluster.x-k8s.io/team-a/demo", Namespaces: []string{"capi-system", "team-a"},
	}
	data, err := AuthenticationYAML(providers, m)
	require.NoError(t, err)
	decoded := &apiserver.AuthenticationConfiguration{}
	_, _, err = serializer.NewCodecFactory(authnScheme, serializer.EnableStrict).UniversalDecoder().Decode(data, nil, decoded)
	require.NoError(t, err, string(data))
	assert.Empty(t, validation.ValidateAuthenticationConfiguration(authenticationcel.NewDefaultCompiler(), decoded, nil))
	require.Len(t, decoded.JWT, 3)
	for _, oidc := range decoded.JWT[:2] {
		require.Len(t, oidc.UserValidationRules, 1, oidc.Issuer.URL)
		assert.Contains(t, oidc.UserValidationRules[0].Expression, `"management-cluster:"`)
	}
	mgmt := decoded.JWT[2]
	assert.Equal(t, []string{"controlplane.cluster.x-k8s.io/team-a/demo"}, mgmt.Issuer.Audiences)
	assert.Equal(t, `claims["kubernetes.io"].namespace in ["capi-system", "team-a"]`, mgmt.ClaimValidationRules[0].Expression)
	assert.Equal(t, `"management-cluster:" + claims.sub`, mgmt.ClaimMappings.Username.Expression)

	require.NoError(t, CheckManagement(m, []string{"https://kubernetes.default.svc.cluster.local"}))
	require.ErrorContains(t, CheckManagement(m, []string{"https://management.example.com"}), "must not overlap with disallowed issuers")
}

func TestValidProvidersPass(t *testing.T) {
	assert.Empty(t, ValidateOIDCProviders(field.NewPath("spec", "oidcProviders"), providers))
}

// Errors of the API server's validation name the provider's field.
func TestProviderErrorsNameTheProvidersField(t *testing.T) {
	errs := ValidateOIDCProviders(field.NewPath("spec", "oidcProviders"), map[string]v1alpha1.OIDCProvider{
		"https://sso.example.com": {
			Audiences:            []string{"a", ""},
			ClaimMappings:        v1alpha1.OIDCClaimMappings{Username: "claims.sub", Groups: "claims.groups +"},
			ClaimValidationRules: []v1alpha1.OIDCClaimValidationRule{{Expression: "1"}},
		},
	})
	var fields []string
	for _, e := range errs {
		fields = append(fields, e.Field)
	}
	assert.ElementsMatch(t, []string{
		"spec.oidcProviders[https://sso.example.com].audiences[1]",
		"spec.oidcProviders[https://sso.example.com].claimMappings.groups",
		"spec.oidcProviders[https://sso.example.com].claimValidationRules[0].expression",
	}, fields, "%v", errs)
}

func TestReservedIssuers(t *testing.T) {
	for issuer, reserved := range map[string]bool{
		"https://kubernetes.default.svc":                true,
		"https://kubernetes.default.svc.cluster.local":  true,
		"https://KUBERNETES.default.svc.corp.internal/": true,
		"https://kubernetes.example.com":                false,
		"https://sso.example.com":                       false,
	} {
		assert.Equal(t, reserved, IsReservedIssuer(issuer), issuer)
	}
}

// The policy file loads with the API server's own loader.
func TestAuditPolicyLoadsAsTheAPIServerLoadsIt(t *testing.T) {
	p := auditv1.Policy{
		OmitStages: []auditv1.Stage{auditv1.StageRequestReceived},
		Rules: []auditv1.PolicyRule{
			{Level: auditv1.LevelNone, Resources: []auditv1.GroupResources{{Resources: []string{"events"}}}},
			{Level: auditv1.LevelMetadata},
		},
	}
	assert.Empty(t, ValidateAuditPolicy(field.NewPath("policy"), &p))
	data, err := AuditPolicyYAML(p)
	require.NoError(t, err)
	loaded, err := policy.LoadPolicyFromBytes(data)
	require.NoError(t, err, string(data))
	assert.Len(t, loaded.Rules, 2)
	assert.Empty(t, p.Kind, "the spec's policy is left as it was")
}
