package envtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
)

// The controller gives the API servers the files of the spec: it holds
// them while a mount's ConfigMap is missing, then renders the
// authentication configuration, the audit policy and the mounts into
// their Deployment; new content of a mount changes the pod template's
// digest; providers removed take their Secret and flag with them.
func TestAPIServerFilesReachTheAPIServers(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	cluster := newCluster(t, ns, "files", int32(freePort(t)))
	hcp := newControlPlane(t, cluster, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.OIDCProviders = map[string]v1alpha1.OIDCProvider{"https://sso.example.com": {
			Audiences: []string{"files"}, ClaimMappings: v1alpha1.OIDCClaimMappings{Username: `"sso:" + claims.sub`},
		}}
		h.Spec.Deployment.APIServer.Audit = &v1alpha1.Audit{Policy: auditv1.Policy{Rules: []auditv1.PolicyRule{{Level: auditv1.LevelMetadata}}}}
		h.Spec.Deployment.APIServer.Mounts = map[string]v1alpha1.Mount{"admission": {
			Path: "/etc/kubernetes/admission", ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "admission"}},
		}}
	})
	svc := get(t, &corev1.Service{}, ns, "files-apiserver")
	setStatus(t, svc, func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.0.0.1"}}
	})
	waitCondition(t, hcp, v1alpha1.KubeconfigReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	rollOutStatefulSet(t, ns, "files-etcd")
	waitCondition(t, hcp, v1alpha1.EtcdReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)

	held := waitCondition(t, hcp, v1alpha1.APIServerReadyCondition, metav1.ConditionFalse, v1alpha1.MountNotFoundReason)
	assert.Equal(t, "spec.deployment.apiServer.mounts[admission]: ConfigMap admission not found in namespace "+ns+"; create it or remove the mount", held.Message)
	absent(t, &appsv1.Deployment{}, ns, "files-apiserver")

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admission"}, Data: map[string]string{"admission.yaml": "v1"}}
	require.NoError(t, env.Client.Create(testContext(t), cm))
	touch(t, hcp) // the ConfigMap is the user's, which no watch reports; the probe interval would bring the pass
	var first string
	waitFor(t, "the API server Deployment with the files", func() error {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "files-apiserver"}, d); err != nil {
			return err
		}
		first = d.Spec.Template.Annotations[components.MountsHashAnnotation]
		if first == "" {
			return fmt.Errorf("no %s", components.MountsHashAnnotation)
		}
		return nil
	})
	d := get(t, &appsv1.Deployment{}, ns, "files-apiserver")
	args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
	for _, arg := range []string{
		"--authentication-config=/etc/kubernetes/authentication/authentication-config.yaml",
		"--audit-policy-file=/etc/kubernetes/audit/audit-policy.yaml", "--audit-log-path=-", "--audit-log-mode=batch",
	} {
		assert.Contains(t, args, arg)
	}
	authn := get(t, &corev1.Secret{}, ns, "files-authentication")
	assert.Contains(t, string(authn.Data["authentication-config.yaml"]), "url: https://sso.example.com")
	assert.Contains(t, string(get(t, &corev1.Secret{}, ns, "files-audit").Data["audit-policy.yaml"]), "level: Metadata")

	cm.Data["admission.yaml"] = "v2"
	require.NoError(t, env.Client.Update(testContext(t), cm))
	touch(t, hcp)
	waitFor(t, "new content of the mount in the pod template's digest", func() error {
		d := get(t, &appsv1.Deployment{}, ns, "files-apiserver")
		if d.Spec.Template.Annotations[components.MountsHashAnnotation] == first {
			return fmt.Errorf("digest still %s", first)
		}
		return nil
	})

	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) { h.Spec.OIDCProviders = nil }))
	waitFor(t, "the authentication configuration gone", func() error {
		err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "files-authentication"}, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("Secret files-authentication: %w", err)
		}
		d := get(t, &appsv1.Deployment{}, ns, "files-apiserver")
		if strings.Contains(strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "), "--authentication-config") {
			return fmt.Errorf("the flag is still set")
		}
		return nil
	})
}

// touch annotates the control plane, which brings a pass at once.
func touch(t *testing.T, hcp *v1alpha1.HostedControlPlane) {
	t.Helper()
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations["test.hostedcp.io/touched"] = metav1.Now().String()
	}))
}
