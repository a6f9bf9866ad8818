package webhooks

import (
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/apiserverconfig"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// validateAPIServerFiles checks what becomes a file of the API server:
// the OIDC providers, the audit policy and the mounts, and that args do
// not name files of their own for what those render.
func validateAPIServerFiles(spec *field.Path, s *v1alpha1.ControlPlaneSettings) field.ErrorList {
	pod := spec.Child("deployment", "apiServer")
	errs := apiserverconfig.ValidateOIDCProviders(spec.Child("oidcProviders"), s.OIDCProviders)
	errs = append(errs, validateServiceAccountIssuer(spec.Child("serviceAccountIssuer"), s.ServiceAccountIssuer)...)
	if s.ServiceAccountIssuer != "" {
		errs = append(errs, renderedArgs(pod.Child("args"), s.Deployment.APIServer.Args, "spec.serviceAccountIssuer",
			func(flag string) bool { return flag == "service-account-issuer" || flag == "service-account-jwks-uri" })...)
	}
	for _, own := range []struct{ issuer, from string }{
		{s.ServiceAccountIssuer, "spec.serviceAccountIssuer"},
		{s.Deployment.APIServer.Args["service-account-issuer"], "spec.deployment.apiServer.args[service-account-issuer]"},
	} {
		if _, clash := s.OIDCProviders[own.issuer]; clash && own.issuer != "" {
			errs = append(errs, field.Forbidden(spec.Child("oidcProviders").Key(own.issuer),
				"is the API server's own service account issuer ("+own.from+"), which it refuses as a JWT issuer"))
		}
	}
	if from := authenticationFrom(s); from != "" {
		errs = append(errs, renderedArgs(pod.Child("args"), s.Deployment.APIServer.Args, from,
			func(flag string) bool { return flag == "authentication-config" || strings.HasPrefix(flag, "oidc-") })...)
	}
	if m := s.ManagementServiceAccounts; m != nil {
		for i, ns := range m.Namespaces {
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				errs = append(errs, field.Invalid(spec.Child("managementServiceAccounts", "namespaces").Index(i), ns,
					"must be a namespace name: "+strings.Join(msgs, "; ")))
			}
		}
	}
	if audit := s.Deployment.APIServer.Audit; audit != nil {
		errs = append(errs, validateAudit(pod.Child("audit"), audit)...)
		errs = append(errs, renderedArgs(pod.Child("args"), s.Deployment.APIServer.Args, "spec.deployment.apiServer.audit",
			func(flag string) bool {
				return flag == "audit-policy-file" || flag == "audit-log-path" || flag == "audit-log-mode" || strings.HasPrefix(flag, "audit-webhook-")
			})...)
	}
	return append(errs, validateMounts(pod.Child("mounts"), s.Deployment.APIServer.Mounts)...)
}

// authenticationFrom is the field the API server's authentication
// configuration is rendered from, or empty.
func authenticationFrom(s *v1alpha1.ControlPlaneSettings) string {
	switch {
	case len(s.OIDCProviders) > 0:
		return "spec.oidcProviders"
	case s.ManagementServiceAccounts != nil:
		return "spec.managementServiceAccounts"
	}
	return ""
}

// validateServiceAccountIssuer checks an issuer URL of the user's choice:
// an https URL with a host and nothing the discovery document's key URL
// (issuer + /openid/v1/jwks) could not follow, and not the in-cluster
// issuer, which the API servers accept anyway.
func validateServiceAccountIssuer(path *field.Path, issuer string) field.ErrorList {
	if issuer == "" {
		return nil
	}
	const allowed = "must be an https URL with a host and an optional path, without user, query, fragment or trailing slash, such as https://oidc.example.com/tenant-a"
	u, err := url.Parse(issuer)
	switch {
	case err != nil, u.Scheme != "https", u.Host == "", u.User != nil, u.RawQuery != "", u.Fragment != "", u.ForceQuery, strings.HasSuffix(issuer, "/"):
		return field.ErrorList{field.Invalid(path, issuer, allowed)}
	case apiserverconfig.IsReservedIssuer(issuer):
		return field.ErrorList{field.Forbidden(path,
			"is the in-cluster issuer (https://kubernetes.default.svc.<cluster domain>), which the API servers accept anyway; name the URL clouds discover the cluster's keys at")}
	}
	return nil
}

// maxTokenLifetime is the longest --service-account-max-token-expiration
// the API server takes.
const maxTokenLifetime = (1 << 32) * time.Second

// validateTokenLifetime checks --service-account-max-token-expiration in
// the API server's args, which a rotation of the service account key waits
// for: a duration the API server takes, from an hour to 2^32 seconds.
func validateTokenLifetime(path *field.Path, args map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(args)) {
		if strings.ReplaceAll(name, "_", "-") != "service-account-max-token-expiration" {
			continue
		}
		if d, err := time.ParseDuration(args[name]); err != nil || d < time.Hour || d > maxTokenLifetime {
			errs = append(errs, field.Invalid(path.Key(name), args[name],
				"must be a duration from 1h to 1193046h28m16s (2^32 seconds), such as 24h: the API servers refuse others, and a rotation of the service account key waits this long for the tokens of the old key to expire"))
		}
	}
	return errs
}

// renderedArgs refuses args the controller sets from field (or that the
// API server refuses beside what it sets, as --oidc-* beside
// --authentication-config).
func renderedArgs(path *field.Path, args map[string]string, from string, rendered func(string) bool) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(args)) {
		if rendered(strings.ReplaceAll(name, "_", "-")) {
			errs = append(errs, field.Forbidden(path.Key(name), fmt.Sprintf("set by the controller from %s; remove it", from)))
		}
	}
	return errs
}

func validateAudit(path *field.Path, audit *v1alpha1.Audit) field.ErrorList {
	errs := apiserverconfig.ValidateAuditPolicy(path.Child("policy"), &audit.Policy)
	if audit.Webhook != nil {
		errs = append(errs, validateAuditWebhook(path.Child("webhook"), audit.Webhook)...)
	}
	return errs
}

// validateAuditWebhook: https targets, each with a CA that parses and a
// token Secret of a valid name and key; and the container of the forwarder
// that posts to them (see validateAuditForwarder).
func validateAuditWebhook(path *field.Path, w *v1alpha1.AuditWebhook) field.ErrorList {
	errs := validateAuditForwarder(path, &w.Container)
	for i, target := range w.Targets {
		at := path.Child("targets").Index(i)
		if u, err := url.Parse(target.Server); err != nil || u.Scheme != "https" || u.Host == "" {
			errs = append(errs, field.Invalid(at.Child("server"), target.Server, "must be an https URL, such as https://audit.example.com/events"))
		}
		if ca := target.CertificateAuthority; ca != "" {
			if _, err := cert.NewPoolFromBytes([]byte(ca)); err != nil {
				errs = append(errs, field.Invalid(at.Child("certificateAuthority"), "<omitted>", "must be PEM encoded certificates: "+err.Error()))
			}
		}
		if auth := target.Authentication; auth != nil {
			errs = append(errs, validateTokenSecret(at.Child("authentication"), auth)...)
		}
	}
	return errs
}

// auditForwarderFlags are the flags of the audit forwarder (tunnel audit)
// that args may set, with what each takes; the others the controller sets.
var auditForwarderFlags = map[string]string{"timeout": "a positive duration, such as 10s"}

// validateAuditForwarder checks the container of the forwarder beside the
// API server, which is this provider's (the tunnel image's tunnel audit),
// not the closest peer's nginx: its image is named in full, since its
// default is the platform's tunnel image rather than one of
// contract.DefaultRegistry; its args are its own flags.
func validateAuditForwarder(path *field.Path, c *v1alpha1.Container) field.ErrorList {
	errs := validateResources(path.Child("resources"), c.Resources)
	if img := c.Image; img != nil {
		errs = append(errs, validateImage(path.Child("image"), img)...)
		if img.Registry == nil || img.Repository == nil || img.Tag == nil {
			errs = append(errs, field.Required(path.Child("image"),
				"set registry, repository and tag: the forwarder's image is a build of this provider's tunnel image (tunnel audit), "+
					"whose default the platform sets (TUNNEL_IMAGE), not an nginx image as for the closest peer"))
		}
	}
	owned := contract.OwnedFlags{
		"listen": "the API server posts its events to the address the controller sets",
		"target": "the controller writes a kubeconfig for each of targets and names them",
	}
	errs = append(errs, validateArgs(path.Child("args"), c.Args, owned)...)
	for _, name := range slices.Sorted(maps.Keys(c.Args)) {
		if _, isOwned := owned.Why(name); isOwned {
			continue
		}
		switch takes, known := auditForwarderFlags[name]; {
		case !known:
			errs = append(errs, field.NotSupported(path.Child("args").Key(name), name, slices.Sorted(maps.Keys(auditForwarderFlags))))
		case name == "timeout":
			if d, err := time.ParseDuration(c.Args[name]); err != nil || d <= 0 {
				errs = append(errs, field.Invalid(path.Child("args").Key(name), c.Args[name], "must be "+takes))
			}
		}
	}
	return errs
}

func validateTokenSecret(path *field.Path, auth *v1alpha1.AuditWebhookAuthentication) field.ErrorList {
	errs := objectName(path.Child("secretName"), auth.SecretName, "Secret", validation.IsDNS1123Subdomain,
		"name the Secret that holds the target's bearer token")
	if ns := auth.SecretNamespace; ns != nil {
		for _, msg := range validation.IsDNS1123Label(*ns) {
			errs = append(errs, field.Invalid(path.Child("secretNamespace"), *ns, "must be a namespace name: "+msg))
		}
	}
	if key := ptr.Deref(auth.TokenKey, v1alpha1.DefaultAuditTokenKey); len(validation.IsConfigMapKey(key)) > 0 {
		errs = append(errs, field.Invalid(path.Child("tokenKey"), key, "must be a key of a Secret's data: "+strings.Join(validation.IsConfigMapKey(key), "; ")))
	}
	return errs
}

// validateMounts: each mount is one ConfigMap or Secret, of a valid name,
// at an absolute, clean directory that is neither at, in nor above a
// directory the controller mounts or another mount.
func validateMounts(fld *field.Path, mounts map[string]v1alpha1.Mount) field.ErrorList {
	var errs field.ErrorList
	names := slices.Sorted(maps.Keys(mounts))
	for _, name := range names {
		m, at := mounts[name], fld.Key(name)
		for _, msg := range validation.IsDNS1123Label(contract.APIServerMountVolume(name)) {
			errs = append(errs, field.Invalid(at, name, "must name a pod volume (mount-<name>): "+msg))
		}
		errs = append(errs, validateMountSource(at, m)...)
		dir := m.Path
		if !path.IsAbs(dir) || path.Clean(dir) != dir || dir == "/" {
			errs = append(errs, field.Invalid(at.Child("path"), dir,
				`must be an absolute directory other than "/", without "..", "." or a trailing "/", such as /etc/kubernetes/admission`))
			continue
		}
		for _, owned := range contract.APIServerOwnedPaths {
			if overlaps(dir, owned) {
				errs = append(errs, field.Forbidden(at.Child("path"), fmt.Sprintf(
					"overlaps %s, where the controller mounts the API server's own files; choose a directory outside %s",
					owned, strings.Join(contract.APIServerOwnedPaths, ", "))))
			}
		}
		for _, other := range names {
			if other < name && overlaps(dir, mounts[other].Path) {
				errs = append(errs, field.Duplicate(at.Child("path"), fmt.Sprintf(
					"%s overlaps the path of mount %s (%s); give each mount a directory of its own", dir, other, mounts[other].Path)))
			}
		}
	}
	return errs
}

func validateMountSource(at *field.Path, m v1alpha1.Mount) field.ErrorList {
	switch {
	case (m.ConfigMap == nil) == (m.Secret == nil):
		return field.ErrorList{field.Invalid(at, "", "must set exactly one of configMap and secret")}
	case m.ConfigMap != nil:
		return objectName(at.Child("configMap", "name"), m.ConfigMap.Name, "ConfigMap", validation.IsDNS1123Subdomain,
			"name the ConfigMap of the control plane's namespace whose keys become the files")
	default:
		return objectName(at.Child("secret", "secretName"), m.Secret.SecretName, "Secret", validation.IsDNS1123Subdomain,
			"name the Secret of the control plane's namespace whose keys become the files")
	}
}

// overlaps is whether one of the directories a and b is, or holds, the
// other.
func overlaps(a, b string) bool {
	within := func(dir, parent string) bool { return dir == parent || strings.HasPrefix(dir, parent+"/") }
	return within(a, b) || within(b, a)
}
