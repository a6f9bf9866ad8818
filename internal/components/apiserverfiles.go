package components

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/apiserverconfig"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// The files the spec gives the API server: its structured authentication
// (spec.oidcProviders), its audit policy (spec.deployment.apiServer.audit)
// and the ConfigMaps and Secrets of spec.deployment.apiServer.mounts.

// MountsHashAnnotation on the API server pod template digests the content
// of the ConfigMaps and Secrets of spec.deployment.apiServer.mounts, which
// the API server reads at start only, so that new content rolls it.
const MountsHashAnnotation = "controlplane.cluster.x-k8s.io/mounts-hash"

func authenticationName(in render.Input) string { return in.Name("authentication") }
func auditName(in render.Input) string          { return in.Name("audit") }

// authenticates is whether the API server reads an
// AuthenticationConfiguration: with OIDC providers or the management
// cluster's service accounts.
func authenticates(in render.Input) bool {
	spec := in.ControlPlane.Spec
	return len(spec.OIDCProviders) > 0 || spec.ManagementServiceAccounts != nil
}

// authenticationConfig is the Secret with the API server's
// AuthenticationConfiguration and, for the management cluster's service
// accounts, the discovery document and keys their sidecar serves.
func authenticationConfig(in render.Input) (*corev1.Secret, error) {
	if !authenticates(in) {
		return nil, nil
	}
	management := managementAuthenticator(in)
	data, err := apiserverconfig.AuthenticationYAML(in.ControlPlane.Spec.OIDCProviders, management)
	if err != nil {
		return nil, err
	}
	secret := configSecret(in, authenticationName(in), contract.AuthenticationConfigFile, data)
	if management != nil {
		discovery, err := managementDiscovery(in.ManagementIssuer)
		if err != nil {
			return nil, err
		}
		secret.Data[contract.ManagementDiscoveryFile] = discovery
		secret.Data[contract.ManagementKeysFile] = in.ManagementIssuer.Keys
	}
	return secret, nil
}

// managementKeysURL is where the sidecar beside each API server serves it
// the management cluster's discovery document and keys.
var managementKeysURL = "https://127.0.0.1:" + strconv.Itoa(contract.ManagementKeysPort)

// managementAuthenticator is the authenticator of the management
// cluster's service accounts, once the controller has read its issuer and
// the cluster CA (which verifies the sidecar, serving with the API
// server's certificate); nil before, or when the spec does not ask for it.
func managementAuthenticator(in render.Input) *apiserverconfig.Management {
	accounts := in.ControlPlane.Spec.ManagementServiceAccounts
	if accounts == nil || in.ManagementIssuer == nil || len(in.ClusterCA) == 0 {
		return nil
	}
	namespaces := accounts.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{in.Namespace()}
	}
	return &apiserverconfig.Management{
		Issuer:               in.ManagementIssuer.URL,
		DiscoveryURL:         managementKeysURL + "/.well-known/openid-configuration",
		CertificateAuthority: string(in.ClusterCA),
		Audience:             contract.ManagementAudience(in.Namespace(), in.ClusterName()),
		Namespaces:           namespaces,
	}
}

// CheckManagementIssuer is why the API servers would refuse the
// authenticator of the management cluster's service accounts, or nil: its
// issuer is one of their own (both clusters on
// https://kubernetes.default.svc.cluster.local, say), whose tokens they
// verify with their own keys.
func CheckManagementIssuer(in render.Input) error {
	m := managementAuthenticator(in)
	if m == nil {
		return nil
	}
	own := []string{inClusterIssuer(in)}
	if issuer := in.ControlPlane.Spec.ServiceAccountIssuer; issuer != "" {
		own = append(own, issuer)
	}
	if slices.Contains(own, m.Issuer) {
		return fmt.Errorf("the management cluster's service account issuer %s is also this cluster's own (%s): the API servers cannot tell its tokens apart; "+
			"give the management cluster's API server another --service-account-issuer (first, keeping the old one after it) or the Cluster another spec.clusterNetwork.serviceDomain",
			m.Issuer, strings.Join(own, ", "))
	}
	return apiserverconfig.CheckManagement(m, own)
}

// managementDiscovery is the discovery document of the management
// cluster's issuer as the sidecar serves it: its keys are the sidecar's.
func managementDiscovery(issuer *render.ManagementIssuer) ([]byte, error) {
	data, err := json.Marshal(struct {
		Issuer        string   `json:"issuer"`
		JWKSURI       string   `json:"jwks_uri"`
		ResponseTypes []string `json:"response_types_supported"`
		SubjectTypes  []string `json:"subject_types_supported"`
		Algorithms    []string `json:"id_token_signing_alg_values_supported"`
	}{issuer.URL, managementKeysURL + "/openid/v1/jwks", []string{"id_token"}, []string{"public"}, issuer.Algorithms})
	if err != nil {
		return nil, fmt.Errorf("encode the management cluster's discovery document: %w", err)
	}
	return data, nil
}

// auditPolicy is the Secret with the API server's audit policy, when the
// spec sets one, and the kubeconfig of its webhook: the one target's, or
// with a forwarder the forwarder's on loopback beside one kubeconfig per
// target.
func auditPolicy(in render.Input) (*corev1.Secret, error) {
	audit := in.ControlPlane.Spec.Deployment.APIServer.Audit
	if audit == nil {
		return nil, nil
	}
	data, err := apiserverconfig.AuditPolicyYAML(audit.Policy)
	if err != nil {
		return nil, err
	}
	secret := configSecret(in, auditName(in), contract.AuditPolicyFile, data)
	if audit.Webhook == nil {
		return secret, nil
	}
	targets := make([][]byte, len(audit.Webhook.Targets))
	for i, target := range audit.Webhook.Targets {
		var token []byte
		if i < len(in.AuditWebhookTokens) {
			token = in.AuditWebhookTokens[i]
		}
		if targets[i], err = encodeKubeconfig("audit", &clientcmdapi.Cluster{
			Server: target.Server, CertificateAuthorityData: []byte(target.CertificateAuthority),
		}, "audit", &clientcmdapi.AuthInfo{Token: string(token)}); err != nil {
			return nil, err
		}
	}
	if !AuditForwarded(audit.Webhook) {
		secret.Data[contract.AuditWebhookConfigFile] = targets[0]
		return secret, nil
	}
	for i, target := range targets {
		secret.Data[contract.AuditTargetFile(i)] = target
	}
	// Plain HTTP on loopback: nothing outside the pod reaches it.
	forwarder, err := encodeKubeconfig("audit", &clientcmdapi.Cluster{Server: auditForwarderURL}, "audit", &clientcmdapi.AuthInfo{})
	if err != nil {
		return nil, err
	}
	secret.Data[contract.AuditWebhookConfigFile] = forwarder
	return secret, nil
}

// AuditForwarded is whether the audit events go through the forwarder
// beside the API server rather than straight to the target: with more than
// one target (the API server posts to one webhook backend only), or when
// the spec tunes the forwarder's container.
func AuditForwarded(w *v1alpha1.AuditWebhook) bool {
	if w == nil {
		return false
	}
	return len(w.Targets) > 1 || w.Image != nil || w.ImagePullPolicy != nil || len(w.Args) > 0 || w.Resources != nil
}

var auditForwarderURL = "http://127.0.0.1:" + strconv.Itoa(contract.AuditForwarderPort)

// auditForwarder is the sidecar that posts the API server's audit events
// to every webhook target (tunnel audit), from the kubeconfigs in the audit
// Secret, which it reads at start: a new token or target changes the
// Secret, which the pod template digests, so the pods roll with it. It is
// a native sidecar (an init container that keeps running), so the kubelet
// starts it before the API server and stops it only after: the events of
// the API server's first and last requests, those of its shutdown delay
// too, have somewhere to go. Its image is the platform's tunnel image
// unless the spec names another (in full: admission requires registry,
// repository and tag).
func auditForwarder(in render.Input) corev1.Container {
	w := in.ControlPlane.Spec.Deployment.APIServer.Audit.Webhook
	flags := map[string][]string{"listen": {"127.0.0.1:" + strconv.Itoa(contract.AuditForwarderPort)}}
	for i := range w.Targets {
		flags["target"] = append(flags["target"], contract.APIServerAuditDir+"/"+contract.AuditTargetFile(i))
	}
	img := in.Settings.TunnelImage
	if w.Image != nil {
		img = render.Image(v1alpha1.ImageSpec{}, w.Image)
	}
	c := render.Container("audit-forwarder", img, w.Container, "/tunnel", append([]string{"audit"}, render.FlagValues(flags, w.Args)...))
	c.VolumeMounts = []corev1.VolumeMount{{Name: "audit", MountPath: contract.APIServerAuditDir, ReadOnly: true}}
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	return c
}

func configSecret(in render.Input, name, key string, data []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: in.Meta(name, contract.APIServerComponent),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{key: data},
	}
}

// apiServerFileArgs are the flags that point the API server at the files
// of the spec.
func apiServerFileArgs(in render.Input, args map[string]string) {
	spec := in.ControlPlane.Spec
	if authenticates(in) {
		args["authentication-config"] = contract.APIServerAuthenticationDir + "/" + contract.AuthenticationConfigFile
	}
	if audit := spec.Deployment.APIServer.Audit; audit != nil {
		args["audit-policy-file"] = contract.APIServerAuditDir + "/" + contract.AuditPolicyFile
		// Standard output, which the management cluster's logging collects.
		args["audit-log-path"] = "-"
		args["audit-log-mode"] = string(ptr.Deref(audit.Mode, v1alpha1.AuditBatch))
		if audit.Webhook != nil {
			args["audit-webhook-config-file"] = contract.APIServerAuditDir + "/" + contract.AuditWebhookConfigFile
			args["audit-webhook-mode"] = string(ptr.Deref(audit.Mode, v1alpha1.AuditBatch))
		}
	}
}

// mountAPIServerFiles mounts the files of the spec into the API server
// container. The authentication configuration is a projected volume, which
// the pod template does not digest: the kubelet updates it in place and
// the API server reloads it (it watches the file), so a change of
// providers takes effect without a restart. The audit policy, which the
// API server reads at start only, is a Secret volume the template
// digests. Mounts are digested apart (MountsHashAnnotation).
func mountAPIServerFiles(in render.Input, pod *corev1.PodSpec, api *corev1.Container) {
	spec := in.ControlPlane.Spec
	if authenticates(in) {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "authentication", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
					LocalObjectReference: corev1.LocalObjectReference{Name: authenticationName(in)},
				}}},
				DefaultMode: ptr.To[int32](0o440),
			},
		}})
		api.VolumeMounts = append(api.VolumeMounts, corev1.VolumeMount{Name: "authentication", MountPath: contract.APIServerAuthenticationDir, ReadOnly: true})
	}
	if spec.Deployment.APIServer.Audit != nil {
		render.MountSecrets(pod, api, render.SecretVolume{Name: "audit", Secret: auditName(in), Path: contract.APIServerAuditDir})
	}
	mounts := spec.Deployment.APIServer.Mounts
	for _, name := range slices.Sorted(maps.Keys(mounts)) {
		m, volume := mounts[name], contract.APIServerMountVolume(name)
		source := corev1.VolumeSource{ConfigMap: m.ConfigMap, Secret: m.Secret}
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: volume, VolumeSource: *source.DeepCopy()})
		api.VolumeMounts = append(api.VolumeMounts, corev1.VolumeMount{Name: volume, MountPath: m.Path, ReadOnly: true})
	}
}

// mountsDigest digests what the mounts hold, as the controller observed
// it; empty without mounts, so that control planes without them keep
// their pod template as it was.
func mountsDigest(in render.Input) (string, error) {
	mounts := in.ControlPlane.Spec.Deployment.APIServer.Mounts
	if len(mounts) == 0 {
		return "", nil
	}
	lines := make([][]byte, 0, len(mounts))
	for _, name := range slices.Sorted(maps.Keys(mounts)) {
		digest, seen := in.MountDigests[name]
		if !seen {
			return "", fmt.Errorf("spec.deployment.apiServer.mounts[%s]: %s not read yet", name, MountSource(mounts[name]))
		}
		lines = append(lines, []byte(name+"="+digest+"\n"))
	}
	return contract.Digest(lines...), nil
}

// MountSource names the ConfigMap or Secret of a mount.
func MountSource(m v1alpha1.Mount) string {
	if m.ConfigMap != nil {
		return "ConfigMap " + m.ConfigMap.Name
	}
	if m.Secret != nil {
		return "Secret " + m.Secret.SecretName
	}
	return "nothing"
}

// managementKeys is the sidecar that serves the API server beside it,
// on loopback, the management cluster's discovery document and keys from
// the authentication Secret (which the kubelet updates in place, and the
// sidecar reads at every request), with the API server's own serving
// certificate: so the API servers verify the management cluster's tokens
// without a way to its API server, which their network policy keeps
// closed.
func managementKeys(in render.Input) corev1.Container {
	auth, pki := contract.APIServerAuthenticationDir, contract.APIServerPKIDir+"/apiserver"
	c := render.Container("management-keys", in.Settings.TunnelImage, v1alpha1.Container{}, "/tunnel", []string{
		"keys",
		"--listen=127.0.0.1:" + strconv.Itoa(contract.ManagementKeysPort),
		"--discovery-file=" + auth + "/" + contract.ManagementDiscoveryFile,
		"--keys-file=" + auth + "/" + contract.ManagementKeysFile,
		"--cert-file=" + pki + "/tls.crt",
		"--key-file=" + pki + "/tls.key",
	})
	c.VolumeMounts = []corev1.VolumeMount{
		{Name: "authentication", MountPath: auth, ReadOnly: true},
		{Name: "apiserver", MountPath: pki, ReadOnly: true},
	}
	return c
}
