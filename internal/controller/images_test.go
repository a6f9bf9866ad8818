package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// A control plane whose image the list refuses, accepted before the list
// did, says so; with no list, or an allowed image, all is well.
func TestImagesAllowed(t *testing.T) {
	hcp := &v1alpha1.HostedControlPlane{}
	hcp.Spec.Etcd.Image = &v1alpha1.ImageSpec{Registry: ptr.To("old.example.com")}

	// "*" is the release bundle's default (clusterctl takes no empty value);
	// the condition said "is empty" for it.
	for _, setting := range []string{"", contract.AnyRegistry} {
		allowed, err := contract.ParseRegistries(setting)
		require.NoError(t, err)
		out := imagesAllowed(hcp, allowed)
		assert.True(t, out.Done)
		assert.Equal(t, `the platform allows images from any registry (ALLOWED_IMAGE_REGISTRIES is "*" or empty)`, out.Message, "setting %q", setting)
	}

	allowed, err := contract.ParseRegistries("registry.k8s.io")
	require.NoError(t, err)
	out := imagesAllowed(hcp, allowed)
	assert.False(t, out.Done)
	assert.True(t, out.Warn, "told in a Warning event once")
	assert.Equal(t, v1alpha1.ImageNotAllowedReason, out.Reason)
	assert.Equal(t, "spec.etcd.image pulls old.example.com/etcd, which is not from a registry this platform allows (registry.k8s.io); use an image from one of them; "+
		"it was accepted before and keeps running, but a change to another image from a registry not allowed is refused", out.Message)

	hcp.Spec.Etcd.Image.Registry = ptr.To("registry.k8s.io")
	out = imagesAllowed(hcp, allowed)
	assert.True(t, out.Done)
	assert.Equal(t, v1alpha1.AllowedRegistriesReason, out.Reason)
}
