package apiserverconfig

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
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
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Management is the authenticator of the management cluster's service
// account tokens (spec.managementServiceAccounts).
type Management struct {
	// Issuer is the management cluster's service account issuer, the iss
	// claim of its tokens.
	Issuer string
	// DiscoveryURL is where the API server fetches the issuer's discovery
	// document, whose jwks_uri names where the keys are; CertificateAuthority
	// (PEM) verifies the server there.
	DiscoveryURL, CertificateAuthority string
	// Audience is the one a token must be requested for.
	Audience string
	// Namespaces are those whose service accounts are accepted.
	Namespaces []string
}

// Authentication is the structured authentication configuration of the
// API server: one JWT authenticator per OIDC provider, in the order of
// their issuer URLs, and, with management, one of the management
// cluster's service accounts after them.
func Authentication(providers map[string]v1alpha1.OIDCProvider, management *Management) *apiserverv1.AuthenticationConfiguration {
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
		if management != nil {
			jwt.UserValidationRules = []apiserverv1.UserValidationRule{reservedPrefixRule}
		}
		config.JWT = append(config.JWT, jwt)
	}
	if management != nil {
		config.JWT = append(config.JWT, management.authenticator())
	}
	return config
}

// reservedPrefixRule keeps the names of the management cluster's service
// accounts theirs: no OIDC provider's claims may map to them.
var reservedPrefixRule = apiserverv1.UserValidationRule{
	Expression: fmt.Sprintf("!user.username.startsWith(%[1]q) && user.groups.all(g, !g.startsWith(%[1]q))", contract.ManagementUserPrefix),
	Message:    "the prefix " + contract.ManagementUserPrefix + " is reserved for the management cluster's service accounts",
}

// authenticator accepts a token of the management cluster's issuer only
// for the audience, of a service account of the namespaces, and maps it
// under contract.ManagementUserPrefix: its user and its namespace's group,
// not the group of every service account, which would take in other
// tenants' namespaces.
func (m *Management) authenticator() apiserverv1.JWTAuthenticator {
	quoted := make([]string, len(m.Namespaces))
	for i, ns := range m.Namespaces {
		quoted[i] = strconv.Quote(ns)
	}
	const sa = `claims["kubernetes.io"]`
	return apiserverv1.JWTAuthenticator{
		Issuer: apiserverv1.Issuer{
			URL: m.Issuer, DiscoveryURL: &m.DiscoveryURL, CertificateAuthority: m.CertificateAuthority,
			Audiences: []string{m.Audience},
		},
		ClaimValidationRules: []apiserverv1.ClaimValidationRule{{
			Expression: sa + ".namespace in [" + strings.Join(quoted, ", ") + "]",
			Message:    "only service accounts of the namespaces " + strings.Join(m.Namespaces, ", ") + " are accepted (spec.managementServiceAccounts.namespaces)",
		}, {
			Expression: `claims.sub == "system:serviceaccount:" + ` + sa + `.namespace + ":" + ` + sa + `.serviceaccount.name`,
			Message:    "not a service account token",
		}},
		ClaimMappings: apiserverv1.ClaimMappings{
			Username: apiserverv1.PrefixedClaimOrExpression{Expression: strconv.Quote(contract.ManagementUserPrefix) + " + claims.sub"},
			Groups:   apiserverv1.PrefixedClaimOrExpression{Expression: "[" + strconv.Quote(contract.ManagementUserPrefix+"system:serviceaccounts:") + " + " + sa + ".namespace]"},
			UID:      apiserverv1.ClaimOrExpression{Expression: sa + ".serviceaccount.uid"},
		},
	}
}

// AuthenticationYAML is Authentication as the API server reads it.
func AuthenticationYAML(providers map[string]v1alpha1.OIDCProvider, management *Management) ([]byte, error) {
	data, err := yaml.Marshal(Authentication(providers, management))
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
		one := Authentication(map[string]v1alpha1.OIDCProvider{issuer: providers[issuer]}, nil)
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

// CheckManagement is what the API server would refuse of the management
// authenticator beside its own service account issuers: one of them as
// the management cluster's issuer (both clusters on
// https://kubernetes.default.svc.cluster.local, say), whose tokens it
// verifies itself.
func CheckManagement(m *Management, serviceAccountIssuers []string) error {
	internal := &apiserver.AuthenticationConfiguration{}
	if err := authnScheme.Convert(Authentication(nil, m), internal, nil); err != nil {
		return fmt.Errorf("convert the authentication configuration: %w", err)
	}
	return validation.ValidateAuthenticationConfiguration(authenticationcel.NewDefaultCompiler(), internal, serviceAccountIssuers).ToAggregate()
}
