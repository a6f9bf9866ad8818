package components

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// Each phase of a rotation of the service account key renders the keys the
// API servers verify with and sign with, and the one the controller manager
// signs with, and mounts exactly their Secrets. The old key is dropped only
// once <cluster>-sa holds the new one.
func TestServiceAccountKeysFollowTheRotation(t *testing.T) {
	const (
		old  = "/etc/kubernetes/pki/sa/tls.key"
		next = "/etc/kubernetes/pki/sa-next/tls.key"
	)
	for _, tc := range []struct {
		phase    v1alpha1.RotationPhase
		copied   bool
		verify   []string
		sign     string
		volumes  []string
		nextCert bool
	}{
		{phase: "", verify: []string{old}, sign: old, volumes: []string{"demo-sa"}},
		{phase: v1alpha1.TrustingNewKey, verify: []string{old, next}, sign: old, volumes: []string{"demo-sa", "demo-sa-next"}, nextCert: true},
		{phase: v1alpha1.SigningWithNewKey, verify: []string{old, next}, sign: next, volumes: []string{"demo-sa", "demo-sa-next"}, nextCert: true},
		{phase: v1alpha1.WaitingForOldTokens, verify: []string{old, next}, sign: next, volumes: []string{"demo-sa", "demo-sa-next"}, nextCert: true},
		{phase: v1alpha1.DroppingOldKey, verify: []string{old, next}, sign: next, volumes: []string{"demo-sa", "demo-sa-next"}, nextCert: true},
		{phase: v1alpha1.DroppingOldKey, copied: true, verify: []string{old}, sign: old, volumes: []string{"demo-sa"}, nextCert: true},
	} {
		t.Run(string(tc.phase)+map[bool]string{true: "/copied"}[tc.copied], func(t *testing.T) {
			in := goldenCases[1].input(t)
			o := in.Observed
			o.SecretDigests = maps.Clone(o.SecretDigests)
			o.SecretDigests["demo-sa-next"] = "s2"
			if tc.copied {
				o.SecretDigests["demo-sa"] = "s2"
			}
			in = in.With(o)
			if tc.phase != "" {
				in.ControlPlane.Status.ServiceAccountKey.Rotation = &v1alpha1.KeyRotation{Phase: tc.phase, Since: metav1.Now()}
			}

			d, err := apiServerDeployment(in)
			require.NoError(t, err)
			api := container(t, d, "kube-apiserver")
			assert.Equal(t, tc.verify, flagValues(api.Args, "service-account-key-file"))
			assert.Equal(t, []string{tc.sign}, flagValues(api.Args, "service-account-signing-key-file"))
			assert.Equal(t, tc.volumes, saSecrets(d))

			objs, err := ControllerManager{}.Render(in)
			require.NoError(t, err)
			kcm := objs[len(objs)-1].(*appsv1.Deployment)
			want := []string{"/etc/kubernetes/pki/sa/tls.key"}
			if tc.sign == next {
				want = []string{next}
			}
			assert.Equal(t, want, flagValues(container(t, kcm, "kube-controller-manager").Args, "service-account-private-key-file"))
			assert.Len(t, saSecrets(kcm), 1, "the controller manager mounts the key it signs with alone")

			apiFlags, kcmFlags := ServiceAccountFlags(in)
			assert.Equal(t, apiFlags, filter(api.Args, ServiceAccountKeyFlag), "ServiceAccountFlags is what the API servers run with")
			assert.Equal(t, kcmFlags, filter(container(t, kcm, "kube-controller-manager").Args, ServiceAccountKeyFlag))

			pki, err := PKI{}.Render(in)
			require.NoError(t, err)
			found := slices.ContainsFunc(pki, func(o client.Object) bool {
				c, ok := o.(*cmv1.Certificate)
				return ok && c.Spec.SecretName == "demo-sa-next" && c.Spec.PrivateKey.RotationPolicy == cmv1.RotationPolicyNever
			})
			assert.Equal(t, tc.nextCert, found, "the new key is issued while the rotation runs")
		})
	}
}

func TestMaxTokenLifetime(t *testing.T) {
	in := goldenCases[1].input(t)
	assert.Equal(t, 24*time.Hour, MaxTokenLifetime(in))
	in.ControlPlane.Spec.Deployment.APIServer.Args = map[string]string{"service-account-max-token-expiration": "2h30m"}
	assert.Equal(t, 150*time.Minute, MaxTokenLifetime(in))
	d, err := apiServerDeployment(in)
	require.NoError(t, err)
	assert.Equal(t, []string{"2h30m"}, flagValues(container(t, d, "kube-apiserver").Args, "service-account-max-token-expiration"))
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

func flagValues(args []string, flag string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

func filter(args []string, keep func(string) bool) []string {
	var out []string
	for _, a := range args {
		if keep(a) {
			out = append(out, a)
		}
	}
	return out
}

// saSecrets are the service account key Secrets a Deployment mounts.
func saSecrets(d *appsv1.Deployment) []string {
	var out []string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil && (v.Secret.SecretName == "demo-sa" || v.Secret.SecretName == "demo-sa-next") {
			out = append(out, v.Secret.SecretName)
		}
	}
	return out
}
