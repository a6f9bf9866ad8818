package envtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// The closest peer's fields, compared one by one with its published API
// (teutonet/cluster-api-provider-hosted-control-plane, api/v1alpha1), and
// what each renders to here (internal/components/testdata/gateway, the
// golden files of a control plane that sets them all):
//
//	peer field                                        here                          renders to
//	spec.oidcProviders{<issuer URL>}                  same map, same key            Secret <cluster>-authentication: an apiserver.config.k8s.io/v1
//	                                                                                AuthenticationConfiguration, one jwt authenticator per issuer;
//	                                                                                --authentication-config; API server egress to the issuers' ports
//	  .certificateAuthority (PEM)                     same                          jwt[].issuer.certificateAuthority
//	  .audiences[] (at least one)                     same                          jwt[].issuer.audiences (+ audienceMatchPolicy MatchAny when several)
//	  .claimValidationRules[]{expression, message}    same                          jwt[].claimValidationRules[]{expression, message}
//	  .claimMappings{username, groups} (CEL)          same                          jwt[].claimMappings.{username,groups}.expression
//	spec.deployment.apiServer.audit                   same                          Secret <cluster>-audit, mounted at /etc/kubernetes/audit
//	  .policy (audit.k8s.io/v1 Policy)                same type                     audit-policy.yaml; --audit-policy-file; a change rolls the API servers
//	  .mode (batch|blocking|blocking-strict)          same enum, default batch      --audit-log-mode
//	  (events always)                                                               --audit-log-path=-: the API server's standard output
//	  .webhook.targets[] (one)                        same shape, + certificateAuthority  audit-webhook.kubeconfig in <cluster>-audit, --audit-webhook-config-file,
//	    {server, authentication{secretName,                                         --audit-webhook-mode; the token read under the ReferenceGrant rule;
//	    secretNamespace, tokenKey}}                                                  API server egress to the target's port
//	  .webhook.targets[] (two or more)                same shape                    a kubeconfig per target in <cluster>-audit (audit-target-<i>.kubeconfig),
//	                                                                                the API server's to the forwarder on 127.0.0.1:6447; the forwarder
//	                                                                                (native sidecar audit-forwarder, tunnel audit) posts to every target
//	  .webhook{image,imagePullPolicy,args,resources}  same shape, the forwarder     the forwarder's container (and the forwarder even for one target);
//	                                                  is ours, not nginx            image in full (registry, repository, tag) from an allowed registry,
//	                                                                                args its flags (timeout), nginx's refused
//	spec.deployment.apiServer.mounts{<name>}          same map                      volume mount-<name>, mounted read-only at path in kube-apiserver;
//	  .path                                           same                          a digest of the content in the pod template (a change rolls)
//	  .configMap (ConfigMapVolumeSource)              same type                     the volume's configMap
//	  .secret (SecretVolumeSource)                    same type                     the volume's secret
//	  exactly one of configMap, secret                same (min/max 2 properties)
//	spec.etcd.autoGrow (default true)                 default true without          autoGrow up to maxVolumeSize, 18Gi unless set: the smallest volume
//	                                                  volumeSize                    whose quota is etcd's suggested most (8Gi)
//	spec.etcd.volumeSize (excludes autoGrow there)    accepted beside autoGrow      the volumes start at volumeSize
//
// Every manifest below is the peer's (its README, its webhook and
// reconciler tests), as its users write them, applied unchanged.
func TestPeerManifestsApplyUnchanged(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	for name, text := range map[string]string{
		"README basic": `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlane
metadata:
  name: my-hosted-control-plane
spec:
  version: v1.33.0
  replicas: 3
  gateway:
    name: capi
    namespace: capi-system`,
		"README oidcProviders": `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlane
metadata: {name: sso}
spec:
  version: v1.33.0
  gateway: {name: capi, namespace: capi-system}
  oidcProviders:
    https://sso.example.com:
      audiences:
        - my-workload-cluster
      claimMappings:
        username: claims.email
        groups: claims.groups
      claimValidationRules:
        - expression: claims.email_verified == true
          message: email must be verified`,
		"webhook test: autoGrow alone and an external issuer": `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlane
metadata: {name: autogrow}
spec:
  version: v1.33.0
  gateway: {name: test-gateway, namespace: default}
  etcd: {autoGrow: true}
  oidcProviders:
    https://oidc.example.com: {audiences: [my-app], claimMappings: {username: claims.sub}}`,
		"reconciler tests: multiple webhook targets": `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlane
metadata: {name: audit-targets}
spec:
  version: v1.33.0
  gateway: {name: capi, namespace: capi-system}
  deployment:
    apiServer:
      audit:
        policy:
          apiVersion: audit.k8s.io/v1
          kind: Policy
          rules:
          - level: Metadata
        webhook:
          targets:
          - server: https://example.com/audit1
          - server: https://example.com/audit2`,
		"reconciler tests: mounts and an audit policy": `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: HostedControlPlane
metadata: {name: files}
spec:
  version: v1.33.0
  gateway: {name: capi, namespace: capi-system}
  deployment:
    apiServer:
      mounts:
        config-mount: {path: /etc/config, configMap: {name: my-config}}
        secret-mount: {path: /etc/secret, secret: {secretName: my-secret}}
      audit:
        mode: batch
        policy:
          apiVersion: audit.k8s.io/v1
          kind: Policy
          rules:
          - level: None`,
	} {
		t.Run(name, func(t *testing.T) {
			obj, err := create(t, ns, text)
			require.NoError(t, err)
			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(obj.GroupVersionKind())
			require.NoError(t, env.Client.Get(testContext(t), client.ObjectKeyFromObject(obj), stored))
			assertSubset(t, "spec", manifest(t, text).Object["spec"], stored.Object["spec"])
		})
	}

	// They mean what the peer means by them to the code that reads them.
	get := func(name string) *v1alpha1.HostedControlPlane {
		hcp := &v1alpha1.HostedControlPlane{}
		require.NoError(t, env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: name}, hcp))
		return hcp
	}
	basic, grow := get("my-hosted-control-plane"), get("autogrow")
	assert.True(t, contract.EtcdAutoGrow(basic), "no etcd section: autoGrow, as the peer's default")
	assert.True(t, contract.EtcdAutoGrow(grow))
	most := contract.EtcdMaxVolumeSize(grow)
	assert.Equal(t, "18Gi", most.String(), "autoGrow alone grows up to where the quota stops growing")
	sso := get("sso").Spec.OIDCProviders["https://sso.example.com"]
	assert.Equal(t, []string{"my-workload-cluster"}, sso.Audiences)
	assert.Equal(t, v1alpha1.OIDCClaimMappings{Username: "claims.email", Groups: "claims.groups"}, sso.ClaimMappings)
	files := get("files").Spec.Deployment.APIServer
	assert.Equal(t, "my-config", files.Mounts["config-mount"].ConfigMap.Name)
	assert.Equal(t, "/etc/secret", files.Mounts["secret-mount"].Path)
	assert.Equal(t, auditv1.LevelNone, files.Audit.Policy.Rules[0].Level)
	targets := get("audit-targets").Spec.Deployment.APIServer.Audit.Webhook
	assert.Len(t, targets.Targets, 2)
	assert.True(t, components.AuditForwarded(targets), "two targets: the forwarder posts to both, as the peer's nginx does")
}

// Admission refuses, naming the field, what the API server would not load
// from the peer's fields (checked in full by the webhooks' unit tests) and
// what would wedge a control plane for good.
func TestAPIServerFilesRefused(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	hcp := func(spec string) string {
		return "apiVersion: controlplane.cluster.x-k8s.io/v1alpha1\nkind: HostedControlPlane\nmetadata: {name: bad}\nspec: " + spec
	}
	for name, tc := range map[string]struct{ manifest, want string }{
		"CEL that does not compile": {
			hcp(`{version: v1.36.3, oidcProviders: {"https://sso.example.com": {audiences: [a], claimMappings: {username: "claims.sub +"}}}}`),
			`spec.oidcProviders[https://sso.example.com].claimMappings.username: Invalid value: "claims.sub +": compilation failed`,
		},
		"an http issuer": {
			hcp(`{version: v1.36.3, oidcProviders: {"http://sso.example.com": {audiences: [a], claimMappings: {username: claims.sub}}}}`),
			`spec.oidcProviders[http://sso.example.com]: Invalid value: "http://sso.example.com": URL scheme must be https`,
		},
		"the management cluster's issuer": {
			hcp(`{version: v1.36.3, oidcProviders: {"https://kubernetes.default.svc.cluster.local": {audiences: [a], claimMappings: {username: claims.sub}}}}`),
			`spec.oidcProviders[https://kubernetes.default.svc.cluster.local]: Forbidden: is reserved`,
		},
		"duplicate audiences": {
			hcp(`{version: v1.36.3, oidcProviders: {"https://sso.example.com": {audiences: [a, a], claimMappings: {username: claims.sub}}}}`),
			`spec.oidcProviders[https://sso.example.com].audiences[1]: Duplicate value: "a"`,
		},
		"an audit policy that does not load": {
			hcp(`{version: v1.36.3, deployment: {apiServer: {audit: {policy: {rules: [{level: Everything}]}}}}}`),
			`spec.deployment.apiServer.audit.policy.rules[0].level: Unsupported value: "Everything"`,
		},
		"a mount over the certificates": {
			hcp(`{version: v1.36.3, deployment: {apiServer: {mounts: {x: {path: /etc/kubernetes/pki, configMap: {name: c}}}}}}`),
			`spec.deployment.apiServer.mounts[x].path: Forbidden: overlaps /etc/kubernetes/pki`,
		},
		"a storage class name no claim takes": {
			hcp(`{version: v1.36.3, etcd: {storageClassName: "UPPER_case!!"}}`),
			`spec.etcd.storageClassName: Invalid value: "UPPER_case!!": must be a StorageClass name`,
		},
		"an endpoint host that is no host": {
			hcp(`{version: v1.36.3, controlPlaneEndpoint: {host: "not a host!!", port: 443}}`),
			`spec.controlPlaneEndpoint.host: Invalid value: "not a host!!": must be a DNS name such as api.example.com or an IP address`,
		},
		"requests above limits": {
			hcp(`{version: v1.36.3, etcd: {resources: {requests: {cpu: "2"}, limits: {cpu: "1"}}}}`),
			`spec.etcd.resources.requests[cpu]: Invalid value: "2": must be at most the limit (1)`,
		},
		"a priority class name no pod takes": {
			hcp(`{version: v1.36.3, deployment: {apiServer: {priorityClassName: "Very_High"}}}`),
			`spec.deployment.apiServer.priorityClassName: Invalid value: "Very_High": must be a PriorityClass name`,
		},
		"no scheduler": {
			hcp(`{version: v1.36.3, deployment: {scheduler: {replicas: 0}}}`),
			`spec.deployment.scheduler.replicas: Invalid value: 0: must be at least 1`,
		},
		"the peer's nginx as the audit forwarder": {
			hcp(`{version: v1.36.3, deployment: {apiServer: {audit: {policy: {rules: [{level: Metadata}]}, webhook: {image: {repository: library/nginx}, args: {g: "daemon off;"}, targets: [{server: "https://a.example.com"}, {server: "https://b.example.com"}]}}}}}`),
			`spec.deployment.apiServer.audit.webhook.image: Required value: set registry, repository and tag`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			obj, err := create(t, ns, tc.manifest)
			require.Error(t, err)
			assert.True(t, apierrors.IsInvalid(err), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
			err = env.Client.Get(testContext(t), client.ObjectKeyFromObject(obj), &v1alpha1.HostedControlPlane{})
			assert.True(t, apierrors.IsNotFound(err), "nothing is stored: %v", err)
		})
	}
}
