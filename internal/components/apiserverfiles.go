package components

import (
	"fmt"
	"maps"
	"slices"

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

// authenticationConfig is the Secret with the API server's
// AuthenticationConfiguration, when the spec names OIDC providers.
func authenticationConfig(in render.Input) (*corev1.Secret, error) {
	providers := in.ControlPlane.Spec.OIDCProviders
	if len(providers) == 0 {
		return nil, nil
	}
	data, err := apiserverconfig.AuthenticationYAML(providers)
	if err != nil {
		return nil, err
	}
	return configSecret(in, authenticationName(in), contract.AuthenticationConfigFile, data), nil
}

// auditPolicy is the Secret with the API server's audit policy, when the
// spec sets one.
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
	if audit.Webhook != nil && len(audit.Webhook.Targets) > 0 {
		target := audit.Webhook.Targets[0]
		kubeconfig, err := encodeKubeconfig("audit", &clientcmdapi.Cluster{
			Server: target.Server, CertificateAuthorityData: []byte(target.CertificateAuthority),
		}, "audit", &clientcmdapi.AuthInfo{Token: string(in.AuditWebhookToken)})
		if err != nil {
			return nil, err
		}
		secret.Data[contract.AuditWebhookConfigFile] = kubeconfig
	}
	return secret, nil
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
	if len(spec.OIDCProviders) > 0 {
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
	if len(spec.OIDCProviders) > 0 {
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
