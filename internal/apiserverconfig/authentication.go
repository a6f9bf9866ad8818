package apiserverconfig

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/apiserver"
	apiserverinstall "k8s.io/apiserver/pkg/apis/apiserver/install"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/apiserver/pkg/apis/apiserver/validation"
	authenticationcel "k8s.io/apiserver/pkg/authentication/cel"
	"sigs.k8s.io/yaml"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// Authentication is the structured authentication configuration of the
// API server: one JWT authenticator per OIDC provider, in the order of
// their issuer URLs.
func Authentication(providers map[string]v1alpha1.OIDCProvider) *apiserverv1.AuthenticationConfiguration {
	config := &apiserverv1.AuthenticationConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: apiserverv1.SchemeGroupVersion.String(), Kind: "AuthenticationConfiguration"},
	}
	for _, issuer := range slices.Sorted(maps.Keys(providers)) {
		p := providers[issuer]
		jwt := apiserverv1.JWTAuthenticator{
			Issuer: apiserverv1.Issuer{
				URL:                  issuer,
				CertificateAuthority: p.CertificateAuthority,
				Audiences:            p.Audiences,
			},
			ClaimMappings: apiserverv1.ClaimMappings{
				Username: apiserverv1.PrefixedClaimOrExpression{Expression: p.ClaimMappings.Username},
			},
		}
		if len(p.Audiences) > 1 {
			// The API server asks to be told that any one will do.
			jwt.Issuer.AudienceMatchPolicy = apiserverv1.AudienceMatchPolicyMatchAny
		}
		if p.ClaimMappings.Groups != "" {
			jwt.ClaimMappings.Groups = apiserverv1.PrefixedClaimOrExpression{Expression: p.ClaimMappings.Groups}
		}
		for _, rule := range p.ClaimValidationRules {
			jwt.ClaimValidationRules = append(jwt.ClaimValidationRules,
				apiserverv1.ClaimValidationRule{Expression: rule.Expression, Message: rule.Message})
		}
		config.JWT = append(config.JWT, jwt)
	}
	return config
}

// AuthenticationYAML is Authentication as the API server reads it.
func AuthenticationYAML(providers map[string]v1alpha1.OIDCProvider) ([]byte, error) {
	data, err := yaml.Marshal(Authentication(providers))
	if err != nil {
		return nil, fmt.Errorf("encode the authentication configuration: %w", err)
	}
	return data, nil
}

// IsReservedIssuer is whether issuer is that of Kubernetes service account
// tokens (https://kubernetes.default.svc, with or without a cluster
// domain): the tenant cluster's own, which its API server verifies itself
// and refuses as a JWT issuer, or the management cluster's, whose tokens
// must not pass as a tenant's users.
func IsReservedIssuer(issuer string) bool {
	u, err := url.Parse(issuer)
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	return host == "kubernetes.default.svc" || strings.HasPrefix(host, "kubernetes.default.svc.")
}

var authnScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	apiserverinstall.Install(s)
	return s
}()

// ValidateOIDCProviders refuses what the API server would not load of the
// authentication configuration the providers render to (an issuer that is
// no https URL, duplicate audiences, a CA that does not parse, a CEL
// expression that does not compile or has the wrong type), and a reserved
// issuer, each error naming the field of spec.oidcProviders at fault.
func ValidateOIDCProviders(path *field.Path, providers map[string]v1alpha1.OIDCProvider) field.ErrorList {
	var errs field.ErrorList
	compiler := authenticationcel.NewDefaultCompiler()
	for _, issuer := range slices.Sorted(maps.Keys(providers)) {
		at := path.Key(issuer)
		if IsReservedIssuer(issuer) {
			errs = append(errs, field.Forbidden(at,
				"is reserved: it is the issuer of Kubernetes service account tokens, which the API server verifies itself; name another issuer"))
			continue
		}
		one := Authentication(map[string]v1alpha1.OIDCProvider{issuer: providers[issuer]})
		internal := &apiserver.AuthenticationConfiguration{}
		if err := authnScheme.Convert(one, internal, nil); err != nil {
			errs = append(errs, field.InternalError(at, fmt.Errorf("convert the authentication configuration: %w", err)))
			continue
		}
		for _, e := range validation.ValidateAuthenticationConfiguration(compiler, internal, nil) {
			errs = append(errs, providerError(at, e))
		}
	}
	return errs
}

// providerFields map the fields of a JWT authenticator, below jwt[0], to
// those of an OIDC provider they are rendered from.
var providerFields = []struct{ from, to string }{
	{"issuer.url", ""},
	{"issuer.certificateAuthority", "certificateAuthority"},
	{"issuer.audiences", "audiences"},
	{"issuer.audienceMatchPolicy", "audiences"},
	{"claimMappings.username.expression", "claimMappings.username"},
	{"claimMappings.groups.expression", "claimMappings.groups"},
	{"claimMappings.username", "claimMappings.username"},
	{"claimMappings.groups", "claimMappings.groups"},
	{"claimMappings", "claimMappings"},
	{"claimValidationRules", "claimValidationRules"},
}

// providerError is e, an error of the API server's validation of the one
// authenticator rendered from the provider at, moved to the field of the
// provider it comes from.
func providerError(at *field.Path, e *field.Error) *field.Error {
	rest := strings.TrimPrefix(strings.TrimPrefix(e.Field, "jwt[0]"), ".")
	out := *e
	out.Field = at.String()
	for _, f := range providerFields {
		if tail, ok := strings.CutPrefix(rest, f.from); ok {
			if f.to != "" {
				out.Field += "." + f.to
			}
			out.Field += tail
			return &out
		}
	}
	if rest != "" {
		out.Field += "." + rest
	}
	return &out
}
