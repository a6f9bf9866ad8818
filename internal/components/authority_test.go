package components

import (
	"maps"
	"slices"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Each phase of a rotation of the etcd CA renders what etcd's members and
// the API servers trust (the trust Secret: in a rotation an earlier release
// started, the bundle of old and new while both may be presented; in a
// cross-signed one, the CA in <cluster>-etcd once the new CA is there, and
// ever after; otherwise the ca.crt beside their certificates), which
// Issuer issues etcd's certificates, and how the CAs are issued: the new
// one a root of its own, the CA's own Certificate self-signed from
// DroppingOldCA on. Outside a rotation nothing differs from a control plane
// never rotated, or rotated by an earlier release, so a controller upgrade
// rolls nothing.
func TestEtcdCAFollowsTheRotation(t *testing.T) {
	const (
		bundle = "/etc/etcd/pki/trust/ca.crt"
		apiPKI = "/etc/kubernetes/pki"
	)
	oldCA, newCA := []byte("-----OLD-----\n"), []byte("-----NEW-----\n")
	for _, tc := range []struct {
		name     string
		phase    v1alpha1.RotationPhase
		rotated  bool
		replaced bool
		cross    bool
		// trustSecret: rotated before by a cross-signed rotation.
		trustSecret bool
		// bundled: what verifies reads the trust Secret, which holds
		// trust.
		bundled    bool
		trust      string
		issuer     string
		selfSigned bool
	}{
		{name: "never-rotated", issuer: "demo-etcd"},
		{name: "trusting", phase: v1alpha1.TrustingNewCA, bundled: true, trust: "-----OLD-----\n-----NEW-----\n", issuer: "demo-etcd"},
		{name: "issuing", phase: v1alpha1.IssuingFromNewCA, bundled: true, trust: "-----OLD-----\n-----NEW-----\n", issuer: "demo-etcd-next"},
		{name: "dropping", phase: v1alpha1.DroppingOldCA, trust: "-----OLD-----\n-----NEW-----\n", issuer: "demo-etcd-next", selfSigned: true},
		{name: "dropping-replaced", phase: v1alpha1.DroppingOldCA, replaced: true, issuer: "demo-etcd", selfSigned: true},
		{name: "rotated", rotated: true, issuer: "demo-etcd", selfSigned: true},
		// Cross-signed: nothing rolls to trust a bundle, and what verifies
		// moves to the trust Secret once, when it holds the new CA.
		{name: "cross-trusting", phase: v1alpha1.TrustingNewCA, cross: true, trust: "-----OLD-----\n", issuer: "demo-etcd"},
		{name: "cross-issuing", phase: v1alpha1.IssuingFromNewCA, cross: true, trust: "-----OLD-----\n", issuer: "demo-etcd-cross"},
		{name: "cross-dropping", phase: v1alpha1.DroppingOldCA, cross: true, trust: "-----OLD-----\n", issuer: "demo-etcd-cross", selfSigned: true},
		{
			name: "cross-dropping-replaced", phase: v1alpha1.DroppingOldCA, cross: true, replaced: true, bundled: true, trust: "-----NEW-----\n",
			issuer: "demo-etcd-cross", selfSigned: true,
		},
		{name: "cross-rotated", rotated: true, trustSecret: true, bundled: true, trust: "-----OLD-----\n", issuer: "demo-etcd", selfSigned: true},
		{
			name: "cross-again-trusting", phase: v1alpha1.TrustingNewCA, cross: true, rotated: true, trustSecret: true, bundled: true,
			trust: "-----OLD-----\n", issuer: "demo-etcd", selfSigned: true,
		},
		{
			name: "cross-again-issuing", phase: v1alpha1.IssuingFromNewCA, cross: true, rotated: true, trustSecret: true, bundled: true,
			trust: "-----OLD-----\n", issuer: "demo-etcd-cross", selfSigned: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := goldenCases[1].input(t)
			o := in.Observed
			o.CACerts = map[string][]byte{"demo-etcd": oldCA, "demo-etcd-next": newCA}
			o.AuthoritySecrets = map[string]render.AuthoritySecret{"demo-etcd-next": {SelfSigned: true, Key: "k2", CertKey: "c2"}}
			o.AuthoritySecrets["demo-etcd"] = render.AuthoritySecret{Key: "k1", CertKey: "c1"}
			if tc.replaced {
				o.AuthoritySecrets["demo-etcd"] = render.AuthoritySecret{SelfSigned: true, Key: "k2", CertKey: "c2"}
				o.CACerts["demo-etcd"] = newCA
			}
			o.SecretDigests = maps.Clone(o.SecretDigests)
			in = in.With(o)
			st := &in.ControlPlane.Status.CertificateAuthorities.Etcd
			if tc.phase != "" {
				st.Rotation = &v1alpha1.KeyRotation{Phase: tc.phase, Since: metav1.Now(), CrossSigned: tc.cross}
			}
			if tc.rotated {
				st.RotatedAt = &metav1.Time{}
			}
			st.TrustSecret = tc.trustSecret

			members := etcdStatefulSet(t, in)
			trusted := []string{"/etc/etcd/pki/server/ca.crt"}
			peerTrusted := []string{"/etc/etcd/pki/peer/ca.crt"}
			apiTrusted := []string{apiPKI + "/etcd/ca.crt"}
			if tc.bundled {
				trusted, peerTrusted, apiTrusted = []string{bundle}, []string{bundle}, []string{apiPKI + "/etcd-trust/ca.crt"}
			}
			assert.Equal(t, trusted, flagValues(members.Spec.Template.Spec.Containers[0].Args, "trusted-ca-file"))
			assert.Equal(t, peerTrusted, flagValues(members.Spec.Template.Spec.Containers[0].Args, "peer-trusted-ca-file"))
			assert.Equal(t, tc.bundled, mountsSecret(members.Spec.Template.Spec, "demo-etcd-trust"))
			// A joining member's wait asks its peers as etcd will, trusting
			// what etcd trusts.
			join := members.Spec.Template.Spec.InitContainers[len(members.Spec.Template.Spec.InitContainers)-1]
			require.Equal(t, "wait-for-peers", join.Name)
			assert.Equal(t, peerTrusted, flagValues(join.Args, "peer-trusted-ca-file"))
			assert.Equal(t, tc.bundled, slices.ContainsFunc(join.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "trust" && m.ReadOnly }))
			// What of their own Secrets the members and the API servers
			// read at start, which their pod templates digest: the CA
			// beside their certificates, but nothing while they trust the
			// trust Secret, so that the certificates issued again
			// meanwhile, which they load at every handshake, restart
			// nothing.
			startup := StartupKeys(in)
			for _, secret := range []string{"demo-etcd-server", "demo-etcd-peer", "demo-apiserver-etcd-client"} {
				keys, listed := startup[secret]
				assert.True(t, listed, secret)
				if tc.bundled {
					assert.Empty(t, keys, "%s: nothing read at start", secret)
				} else {
					assert.Equal(t, []string{render.CAKey}, keys, secret)
				}
			}

			d, err := apiServerDeployment(in)
			require.NoError(t, err)
			assert.Equal(t, apiTrusted, flagValues(container(t, d, "kube-apiserver").Args, "etcd-cafile"))
			assert.Equal(t, tc.bundled, mountsSecret(d.Spec.Template.Spec, "demo-etcd-trust"))
			assert.Equal(t, []string{apiPKI + "/front-proxy/ca.crt"}, flagValues(container(t, d, "kube-apiserver").Args, "requestheader-client-ca-file"),
				"the front proxy CA is not rotated")

			certs := pkiObjects[*cmv1.Certificate](t, in)
			for _, secret := range []string{"demo-etcd-server", "demo-etcd-peer", "demo-etcd-healthcheck-client", "demo-apiserver-etcd-client"} {
				assert.Equal(t, tc.issuer, certs[secret].Spec.IssuerRef.Name, secret)
			}
			assert.Equal(t, "demo-proxy", certs["demo-front-proxy-client"].Spec.IssuerRef.Name, "the front proxy CA is not rotated")
			assert.Equal(t, []string{"demo-apiserver-etcd-client", "demo-etcd-server", "demo-etcd-peer", "demo-etcd-healthcheck-client"},
				CertificatesOf(in, tc.issuer))
			_, crossIssuer := pkiObjects[*cmv1.Issuer](t, in)["demo-etcd-cross"]
			assert.Equal(t, tc.issuer == "demo-etcd-cross", crossIssuer, "Cross has an Issuer while it issues")
			wantIssuer := "demo-ca"
			if tc.selfSigned {
				wantIssuer = "demo-selfsigned"
			}
			assert.Equal(t, wantIssuer, certs["demo-etcd"].Spec.IssuerRef.Name)
			next, rotating := certs["demo-etcd-next"]
			assert.Equal(t, tc.phase != "", rotating, "the new CA is issued during a rotation only")
			if rotating {
				assert.True(t, next.Spec.IsCA)
				assert.Equal(t, "demo-selfsigned", next.Spec.IssuerRef.Name, "the new CA is a root of its own")
				assert.Equal(t, cmv1.RotationPolicyNever, next.Spec.PrivateKey.RotationPolicy)
			}

			configs, err := Configs{}.Render(in)
			require.NoError(t, err)
			var trust *corev1.Secret
			for _, obj := range configs {
				if obj.GetName() == "demo-etcd-trust" {
					trust = obj.(*corev1.Secret)
				}
			}
			if tc.phase == "" && !tc.trustSecret {
				assert.Nil(t, trust, "no trust bundle outside a rotation")
				return
			}
			require.NotNil(t, trust, "the bundle stays until the rotation ends: pods of the phase before still mount it")
			assert.Equal(t, "kube-apiserver", trust.Labels[contract.ComponentLabel], "pruned by Configs once the rotation ended")
			if tc.trust != "" {
				assert.Equal(t, tc.trust, string(trust.Data["ca.crt"]))
			}
		})
	}
}

func etcdStatefulSet(t *testing.T, in render.Input) *appsv1.StatefulSet {
	t.Helper()
	objs, err := etcd.Component{}.Render(in)
	require.NoError(t, err)
	for _, obj := range objs {
		if sts, ok := obj.(*appsv1.StatefulSet); ok {
			return sts
		}
	}
	t.Fatal("no StatefulSet")
	return nil
}

func mountsSecret(pod corev1.PodSpec, secret string) bool {
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secret {
			return true
		}
	}
	return false
}

// pkiObjects are the objects of type T PKI renders, by name.
func pkiObjects[T client.Object](t *testing.T, in render.Input) map[string]T {
	t.Helper()
	objs, err := PKI{}.Render(in)
	require.NoError(t, err)
	out := map[string]T{}
	for _, obj := range objs {
		if o, ok := obj.(T); ok {
			out[o.GetName()] = o
		}
	}
	return out
}
