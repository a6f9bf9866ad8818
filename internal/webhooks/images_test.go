package webhooks

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

func allowed(t *testing.T, list string) contract.Registries {
	t.Helper()
	r, err := contract.ParseRegistries(list)
	require.NoError(t, err)
	return r
}

// Every image field of a control plane is checked, and the message names
// the field, the image and the registries allowed.
func TestDisallowedImagesNameTheField(t *testing.T) {
	registries := allowed(t, "registry.k8s.io,registry.example.com/mirror")
	hcp := valid()
	fields := containers(field.NewPath("spec"), &hcp.Spec.ControlPlaneSettings)
	require.Len(t, fields, 8)
	for _, c := range fields {
		c.spec.Image = &v1alpha1.ImageSpec{Registry: ptr.To("evil.example.com"), Repository: ptr.To("miner")}
	}
	hcp.Spec.Deployment.APIServer.Audit = &v1alpha1.Audit{Webhook: &v1alpha1.AuditWebhook{
		Container: v1alpha1.Container{Image: &v1alpha1.ImageSpec{Registry: ptr.To("evil.example.com"), Repository: ptr.To("miner"), Tag: ptr.To("v1")}},
	}}
	var got []string
	for _, e := range DisallowedImages(field.NewPath("spec"), &hcp.Spec.ControlPlaneSettings, registries) {
		got = append(got, e.Error())
	}
	const tail = `: Forbidden: pulls evil.example.com/miner, which is not from a registry this platform allows (registry.k8s.io, registry.example.com/mirror); use an image from one of them`
	assert.Equal(t, []string{
		"spec.deployment.apiServer.image" + tail,
		"spec.deployment.apiServer.konnectivity.image" + tail,
		"spec.deployment.controllerManager.image" + tail,
		"spec.deployment.scheduler.image" + tail,
		"spec.etcd.image" + tail,
		"spec.konnectivityClient.image" + tail,
		"spec.coredns.image" + tail,
		"spec.kubeProxy.image" + tail,
		"spec.deployment.apiServer.audit.webhook.image" + tail,
	}, got)
}

// The registry an override pulls from is read as a container runtime reads
// the image the renderer joins: unset parts are the default image's.
func TestDisallowedImagesEdgeCases(t *testing.T) {
	registries := allowed(t, "registry.example.com/mirror")
	for name, tc := range map[string]struct {
		image *v1alpha1.ImageSpec
		want  string // "" when allowed
	}{
		"no override":                {nil, ""},
		"empty override":             {&v1alpha1.ImageSpec{}, ""},
		"mirror":                     {&v1alpha1.ImageSpec{Registry: ptr.To("registry.example.com/mirror")}, ""},
		"deeper in the mirror":       {&v1alpha1.ImageSpec{Registry: ptr.To("registry.example.com"), Repository: ptr.To("mirror/etcd")}, ""},
		"beside the mirror":          {&v1alpha1.ImageSpec{Registry: ptr.To("registry.example.com/mirrorevil")}, "pulls registry.example.com/mirrorevil/etcd,"},
		"a look-alike host":          {&v1alpha1.ImageSpec{Registry: ptr.To("registry.example.com.evil.com/mirror")}, "pulls registry.example.com.evil.com/mirror/etcd,"},
		"another port":               {&v1alpha1.ImageSpec{Registry: ptr.To("registry.example.com:443/mirror")}, "pulls registry.example.com:443/mirror/etcd,"},
		"a repository alone":         {&v1alpha1.ImageSpec{Repository: ptr.To("etcd-fork")}, "pulls registry.k8s.io/etcd-fork (image.registry is unset: the default registry),"},
		"a tag alone":                {&v1alpha1.ImageSpec{Tag: ptr.To("3.5.0-0")}, "pulls registry.k8s.io/etcd (image.registry is unset: the default registry),"},
		"a host in a repository":     {&v1alpha1.ImageSpec{Repository: ptr.To("registry.example.com/mirror/etcd")}, "pulls registry.k8s.io/registry.example.com/mirror/etcd"},
		"Docker Hub by a short name": {&v1alpha1.ImageSpec{Registry: ptr.To("mirror")}, "pulls mirror/etcd,"},
		// Malformed parts are validateImage's to refuse, once.
		"userinfo": {&v1alpha1.ImageSpec{Registry: ptr.To("registry.example.com@evil.com")}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			hcp := valid()
			hcp.Spec.Etcd.Image = tc.image
			errs := DisallowedImages(field.NewPath("spec"), &hcp.Spec.ControlPlaneSettings, registries)
			if tc.want == "" {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1)
			assert.Contains(t, errs[0].Error(), "spec.etcd.image: Forbidden: "+tc.want)
		})
	}
	hcp := valid()
	hcp.Spec.Etcd.Image = &v1alpha1.ImageSpec{Registry: ptr.To("registry.example.com@evil.com")}
	_, err := HostedControlPlane{AllowedRegistries: registries}.ValidateCreate(context.Background(), hcp)
	require.ErrorContains(t, err, `spec.etcd.image.registry: Invalid value: "registry.example.com@evil.com": must be a registry host`)
}

// No list allows every registry.
func TestAnyRegistryWithoutAList(t *testing.T) {
	hcp := valid()
	hcp.Spec.Etcd.Image = &v1alpha1.ImageSpec{Registry: ptr.To("anywhere.example.com")}
	_, err := HostedControlPlane{}.ValidateCreate(context.Background(), hcp)
	require.NoError(t, err)
}

// A control plane stored before the list refused its image is still
// updated, its version too, as long as the update does not choose another
// image the list refuses; a new one is refused. Templates alike.
func TestDisallowedImageStoredBefore(t *testing.T) {
	w := HostedControlPlane{AllowedRegistries: allowed(t, "registry.k8s.io")}
	old := valid()
	old.Spec.Version = "v1.35.2"
	old.Spec.Deployment.APIServer.Image = &v1alpha1.ImageSpec{Registry: ptr.To("old.example.com")}

	_, err := w.ValidateCreate(context.Background(), old)
	require.ErrorContains(t, err, "spec.deployment.apiServer.image: Forbidden: pulls old.example.com/kube-apiserver, which is not from a registry this platform allows (registry.k8s.io)")

	hcp := old.DeepCopy()
	hcp.Spec.Version = "v1.36.3"
	hcp.Spec.Replicas = ptr.To[int32](3)
	hcp.Spec.Deployment.APIServer.Image.Tag = ptr.To("v1.36.3")
	_, err = w.ValidateUpdate(context.Background(), old, hcp)
	require.NoError(t, err, "the same registry and repository, another tag and version")

	hcp.Spec.Deployment.APIServer.Image.Registry = ptr.To("other.example.com")
	_, err = w.ValidateUpdate(context.Background(), old, hcp)
	require.ErrorContains(t, err, "spec.deployment.apiServer.image: Forbidden: pulls other.example.com/kube-apiserver")

	hcp = old.DeepCopy()
	hcp.Spec.Etcd.Image = &v1alpha1.ImageSpec{Registry: ptr.To("old.example.com")}
	_, err = w.ValidateUpdate(context.Background(), old, hcp)
	require.ErrorContains(t, err, "spec.etcd.image: Forbidden: pulls old.example.com/etcd", "another field choosing that registry is new input")

	tw := HostedControlPlaneTemplate(w)
	oldT := &v1alpha1.HostedControlPlaneTemplate{}
	oldT.Spec.Template.Spec.CoreDNS.Image = &v1alpha1.ImageSpec{Registry: ptr.To("old.example.com")}
	_, err = tw.ValidateCreate(context.Background(), oldT)
	require.ErrorContains(t, err, "spec.template.spec.coredns.image: Forbidden: pulls old.example.com/coredns/coredns")
	tmpl := oldT.DeepCopy()
	tmpl.Spec.Template.Spec.Replicas = ptr.To[int32](3)
	_, err = tw.ValidateUpdate(context.Background(), oldT, tmpl)
	require.NoError(t, err)
}
