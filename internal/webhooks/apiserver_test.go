package webhooks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// settings reads a control plane spec's settings as a user writes them.
func settings(t *testing.T, text string) *v1alpha1.ControlPlaneSettings {
	t.Helper()
	s := &v1alpha1.ControlPlaneSettings{}
	require.NoError(t, yaml.UnmarshalStrict([]byte(text), s))
	return s
}

// Each file the API server would refuse to load, and each value its
// objects would refuse, is refused at admission naming the field.
func TestAPIServerSettingsRefusedNamingTheField(t *testing.T) {
	const provider = `{audiences: [a], claimMappings: {username: claims.sub}}`
	for name, tc := range map[string]struct{ spec, want string }{
		"CEL that does not compile": {
			`oidcProviders: {"https://sso.example.com": {audiences: [a], claimMappings: {username: "claims.sub +"}}}`,
			`spec.oidcProviders[https://sso.example.com].claimMappings.username: Invalid value: "claims.sub +": compilation failed`,
		},
		"CEL of the wrong type": {
			`oidcProviders: {"https://sso.example.com": {audiences: [a], claimMappings: {username: claims.sub}, claimValidationRules: [{expression: "claims.sub"}]}}`,
			`spec.oidcProviders[https://sso.example.com].claimValidationRules[0].expression: Invalid value: "claims.sub": must evaluate to bool`,
		},
		"an issuer that is not https": {
			`oidcProviders: {"http://sso.example.com": ` + provider + `}`,
			`spec.oidcProviders[http://sso.example.com]: Invalid value: "http://sso.example.com": URL scheme must be https`,
		},
		"the issuer of service account tokens": {
			`oidcProviders: {"https://kubernetes.default.svc.cluster.local": ` + provider + `}`,
			`spec.oidcProviders[https://kubernetes.default.svc.cluster.local]: Forbidden: is reserved`,
		},
		"the API server's own issuer set in args": {
			`{oidcProviders: {"https://issuer.example.com": ` + provider + `}, deployment: {apiServer: {args: {service-account-issuer: "https://issuer.example.com"}}}}`,
			`spec.oidcProviders[https://issuer.example.com]: Forbidden: is the API server's own service account issuer`,
		},
		"the API server's own issuer set in spec.serviceAccountIssuer": {
			`{oidcProviders: {"https://issuer.example.com": ` + provider + `}, serviceAccountIssuer: "https://issuer.example.com"}`,
			`spec.oidcProviders[https://issuer.example.com]: Forbidden: is the API server's own service account issuer (spec.serviceAccountIssuer)`,
		},
		"a service account issuer that is not https": {
			`serviceAccountIssuer: "http://oidc.example.com"`,
			`spec.serviceAccountIssuer: Invalid value: "http://oidc.example.com": must be an https URL with a host`,
		},
		"a service account issuer with a query": {
			`serviceAccountIssuer: "https://oidc.example.com/a?b=c"`,
			`spec.serviceAccountIssuer: Invalid value: "https://oidc.example.com/a?b=c": must be an https URL`,
		},
		"a service account issuer with a trailing slash": {
			`serviceAccountIssuer: "https://oidc.example.com/"`,
			`spec.serviceAccountIssuer: Invalid value: "https://oidc.example.com/": must be an https URL`,
		},
		"the in-cluster issuer as the service account issuer": {
			`serviceAccountIssuer: "https://kubernetes.default.svc.cluster.local"`,
			`spec.serviceAccountIssuer: Forbidden: is the in-cluster issuer`,
		},
		"the issuer flags beside spec.serviceAccountIssuer": {
			`{serviceAccountIssuer: "https://oidc.example.com", deployment: {apiServer: {args: {service-account-jwks-uri: "https://x/keys"}}}}`,
			`spec.deployment.apiServer.args[service-account-jwks-uri]: Forbidden: set by the controller from spec.serviceAccountIssuer`,
		},
		"duplicate audiences": {
			`oidcProviders: {"https://sso.example.com": {audiences: [a, a], claimMappings: {username: claims.sub}}}`,
			`spec.oidcProviders[https://sso.example.com].audiences[1]: Duplicate value: "a"`,
		},
		"a CA that does not parse": {
			`oidcProviders: {"https://sso.example.com": {certificateAuthority: nope, audiences: [a], claimMappings: {username: claims.sub}}}`,
			`spec.oidcProviders[https://sso.example.com].certificateAuthority: Invalid value: "<omitted>"`,
		},
		"oidc flags beside the providers": {
			`{oidcProviders: {"https://sso.example.com": ` + provider + `}, deployment: {apiServer: {args: {oidc-issuer-url: "https://x"}}}}`,
			`spec.deployment.apiServer.args[oidc-issuer-url]: Forbidden: set by the controller from spec.oidcProviders`,
		},
		"a management namespace that is no namespace name": {
			`managementServiceAccounts: {namespaces: [capi-system, "Team_A"]}`,
			`spec.managementServiceAccounts.namespaces[1]: Invalid value: "Team_A": must be a namespace name`,
		},
		"an authentication configuration of one's own beside the management service accounts": {
			`{managementServiceAccounts: {}, deployment: {apiServer: {args: {authentication-config: /etc/authn.yaml}}}}`,
			`spec.deployment.apiServer.args[authentication-config]: Forbidden: set by the controller from spec.managementServiceAccounts`,
		},
		"an audit level that does not exist": {
			`deployment: {apiServer: {audit: {policy: {rules: [{level: Everything}]}}}}`,
			`spec.deployment.apiServer.audit.policy.rules[0].level: Unsupported value: "Everything"`,
		},
		"an audit policy without rules": {
			`deployment: {apiServer: {audit: {policy: {omitStages: [RequestReceived]}}}}`,
			`spec.deployment.apiServer.audit.policy.rules: Required value`,
		},
		"an audit policy file in args beside the policy": {
			`deployment: {apiServer: {audit: {policy: {rules: [{level: Metadata}]}}, args: {audit-policy-file: /x}}}`,
			`spec.deployment.apiServer.args[audit-policy-file]: Forbidden: set by the controller from spec.deployment.apiServer.audit`,
		},
		"a mount over the controller's files": {
			`deployment: {apiServer: {mounts: {pki: {path: /etc/kubernetes/pki/extra, secret: {secretName: s}}}}}`,
			`spec.deployment.apiServer.mounts[pki].path: Forbidden: overlaps /etc/kubernetes/pki`,
		},
		"a mount above the controller's files": {
			`deployment: {apiServer: {mounts: {all: {path: /etc/kubernetes, configMap: {name: c}}}}}`,
			`spec.deployment.apiServer.mounts[all].path: Forbidden: overlaps /etc/kubernetes/pki`,
		},
		"two mounts in one directory": {
			`deployment: {apiServer: {mounts: {a: {path: /etc/a, configMap: {name: c}}, b: {path: /etc/a/b, configMap: {name: d}}}}}`,
			`spec.deployment.apiServer.mounts[b].path: Duplicate value: "/etc/a/b overlaps the path of mount a (/etc/a)`,
		},
		"a relative mount path": {
			`deployment: {apiServer: {mounts: {a: {path: etc/a, configMap: {name: c}}}}}`,
			`spec.deployment.apiServer.mounts[a].path: Invalid value: "etc/a": must be an absolute directory`,
		},
		"a mount path with ..": {
			`deployment: {apiServer: {mounts: {a: {path: /etc/../run/konnectivity, configMap: {name: c}}}}}`,
			`spec.deployment.apiServer.mounts[a].path: Invalid value: "/etc/../run/konnectivity": must be an absolute directory`,
		},
		"a mount of both kinds": {
			`deployment: {apiServer: {mounts: {a: {path: /etc/a, configMap: {name: c}, secret: {secretName: s}}}}}`,
			`spec.deployment.apiServer.mounts[a]: Invalid value: "": must set exactly one of configMap and secret`,
		},
		"a storage class no volume claim takes": {
			`etcd: {storageClassName: "UPPER_case!!"}`,
			`spec.etcd.storageClassName: Invalid value: "UPPER_case!!": must be a StorageClass name`,
		},
		"requests above limits": {
			`deployment: {apiServer: {resources: {requests: {memory: 2Gi}, limits: {memory: 1Gi}}}}`,
			`spec.deployment.apiServer.resources.requests[memory]: Invalid value: "2Gi": must be at most the limit (1Gi)`,
		},
		"a priority class name no pod takes": {
			`deployment: {scheduler: {priorityClassName: "High Priority"}}`,
			`spec.deployment.scheduler.priorityClassName: Invalid value: "High Priority": must be a PriorityClass name`,
		},
		"no controller manager": {
			`deployment: {controllerManager: {replicas: 0}}`,
			`spec.deployment.controllerManager.replicas: Invalid value: 0: must be at least 1`,
		},
		"no scheduler": {
			`deployment: {scheduler: {replicas: 0}}`,
			`spec.deployment.scheduler.replicas: Invalid value: 0: must be at least 1`,
		},
		"the peer's nginx image for the audit forwarder": {
			`deployment: {apiServer: {audit: {policy: {rules: [{level: Metadata}]}, webhook: {image: {tag: "1.27"}, targets: [{server: "https://a.example.com"}]}}}}`,
			`spec.deployment.apiServer.audit.webhook.image: Required value: set registry, repository and tag: the forwarder's image is a build of this provider's tunnel image`,
		},
		"the peer's nginx args for the audit forwarder": {
			`deployment: {apiServer: {audit: {policy: {rules: [{level: Metadata}]}, webhook: {args: {g: "daemon off;"}, targets: [{server: "https://a.example.com"}]}}}}`,
			`spec.deployment.apiServer.audit.webhook.args[g]: Unsupported value: "g": supported values: "timeout"`,
		},
		"an audit forwarder's listen address in args": {
			`deployment: {apiServer: {audit: {policy: {rules: [{level: Metadata}]}, webhook: {args: {listen: ":80"}, targets: [{server: "https://a.example.com"}]}}}}`,
			`spec.deployment.apiServer.audit.webhook.args[listen]: Forbidden: set by the controller`,
		},
		"an audit forwarder timeout that is no duration": {
			`deployment: {apiServer: {audit: {policy: {rules: [{level: Metadata}]}, webhook: {args: {timeout: "soon"}, targets: [{server: "https://a.example.com"}]}}}}`,
			`spec.deployment.apiServer.audit.webhook.args[timeout]: Invalid value: "soon": must be a positive duration`,
		},
		"an audit forwarder asking for more than its limit": {
			`deployment: {apiServer: {audit: {policy: {rules: [{level: Metadata}]}, webhook: {resources: {requests: {memory: 1Gi}, limits: {memory: 64Mi}}, targets: [{server: "https://a.example.com"}]}}}}`,
			`spec.deployment.apiServer.audit.webhook.resources.requests[memory]: Invalid value: "1Gi": must be at most the limit`,
		},
		"the second audit webhook target over http": {
			`deployment: {apiServer: {audit: {policy: {rules: [{level: Metadata}]}, webhook: {targets: [{server: "https://a.example.com"}, {server: "http://b.example.com"}]}}}}`,
			`spec.deployment.apiServer.audit.webhook.targets[1].server: Invalid value: "http://b.example.com": must be an https URL`,
		},
		"an audit webhook over http": {
			`deployment: {apiServer: {audit: {policy: {rules: [{level: Metadata}]}, webhook: {targets: [{server: "http://a.example.com"}]}}}}`,
			`spec.deployment.apiServer.audit.webhook.targets[0].server: Invalid value: "http://a.example.com": must be an https URL`,
		},
		"an audit webhook token key no Secret has": {
			`deployment: {apiServer: {audit: {policy: {rules: [{level: Metadata}]}, webhook: {targets: [{server: "https://a.example.com", authentication: {secretName: t, tokenKey: "a/b"}}]}}}}`,
			`spec.deployment.apiServer.audit.webhook.targets[0].authentication.tokenKey: Invalid value: "a/b"`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			errs := ValidateSettings(field.NewPath("spec"), settings(t, tc.spec))
			require.NotEmpty(t, errs)
			assert.Contains(t, errs.ToAggregate().Error(), tc.want)
		})
	}
}

// What the closest peer's README shows, and mounts beside the controller's
// files, are accepted.
func TestAPIServerSettingsAccepted(t *testing.T) {
	errs := ValidateSettings(field.NewPath("spec"), settings(t, `
oidcProviders:
  https://sso.example.com:
    audiences: [my-workload-cluster]
    claimMappings: {username: claims.email, groups: claims.groups}
    claimValidationRules:
    - {expression: claims.email_verified == true, message: email must be verified}
deployment:
  apiServer:
    audit:
      mode: blocking
      policy: {apiVersion: audit.k8s.io/v1, kind: Policy, rules: [{level: Metadata}]}
      webhook:
        args: {timeout: 10s}
        resources: {requests: {memory: 16Mi}}
        image: {registry: mirror.example.com, repository: hostedcp/cluster-api-provider-hosted-tunnel, tag: v1.0.0}
        targets:
        - {server: "https://audit.example.com/events", authentication: {secretName: audit-token, secretNamespace: logging}}
        - {server: "https://archive.example.com:8443"}
    mounts:
      admission: {path: /etc/kubernetes/admission, configMap: {name: admission}}
      authz: {path: /etc/authz, secret: {secretName: authz}}
  scheduler: {priorityClassName: system-cluster-critical}
etcd: {storageClassName: fast.ssd}`))
	assert.Empty(t, errs)
}

// A value that never worked may be corrected where a working one cannot
// change: the storage class made no volume, the host reached nothing.
func TestNeverWorkingValuesMayBeCorrected(t *testing.T) {
	old := &v1alpha1.HostedControlPlane{}
	old.Spec.Version = "v1.36.3"
	old.Spec.Etcd.StorageClassName = new("UPPER_case!!")
	old.Spec.ControlPlaneEndpoint.Host = "not a host!!"
	fixed := old.DeepCopy()
	fixed.Spec.Etcd.StorageClassName = new("fast")
	fixed.Spec.ControlPlaneEndpoint.Host = "api.example.com"
	assert.Empty(t, ValidateHostedControlPlaneUpdate(old, fixed))

	changed := fixed.DeepCopy()
	changed.Spec.Etcd.StorageClassName = new("slow")
	changed.Spec.ControlPlaneEndpoint.Host = "api2.example.com"
	errs := ValidateHostedControlPlaneUpdate(fixed, changed)
	assert.Len(t, errs, 2, "a working value stays: %v", errs)

	assert.ErrorContains(t, ValidateHostedControlPlane(old).ToAggregate(),
		`spec.controlPlaneEndpoint.host: Invalid value: "not a host!!": must be a DNS name such as api.example.com or an IP address`,
		"and is refused when it comes")
}
