package webhooks

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

func TestDefaultAddsVOnlyToVersionNumbers(t *testing.T) {
	for in, want := range map[string]string{"1.36.3": "v1.36.3", "v1.36.3": "v1.36.3", "latest": "latest", "": ""} {
		hcp := &v1alpha1.HostedControlPlane{}
		hcp.Spec.Version = in
		require.NoError(t, HostedControlPlane{}.Default(context.Background(), hcp))
		assert.Equal(t, want, hcp.Spec.Version, in)
	}
}

// Two API servers unless said otherwise; a set number stays.
func TestDefaultReplicas(t *testing.T) {
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, HostedControlPlane{}.Default(context.Background(), hcp))
	assert.Equal(t, ptr.To[int32](2), hcp.Spec.Replicas)
	hcp.Spec.Replicas = ptr.To[int32](5)
	require.NoError(t, HostedControlPlane{}.Default(context.Background(), hcp))
	assert.Equal(t, ptr.To[int32](5), hcp.Spec.Replicas)
}

func TestVersionChange(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{"v1.35.2", "v1.35.3", ""},
		{"v1.35.2", "v1.36.0", ""},
		{"v1.35.2", "v1.36.0-rc.1", ""},
		{"v1.36.0-rc.1", "v1.36.0", ""},
		{"garbage", "v1.30.0", ""}, // a stored version that does not parse may be corrected
		{"v1.35.2", "v1.35.1", "cannot downgrade from v1.35.2 to v1.35.1"},
		{"v1.36.0", "v1.36.0-rc.1", "cannot downgrade"},
		{"v1.34.9", "v1.36.0", "cannot skip a minor version from v1.34.9 to v1.36.0: upgrade to v1.35.x first"},
		{"v1.35.0", "v2.0.0", "cannot change the major version"},
	} {
		errs := validateVersionChange(field.NewPath("spec", "version"), tc.from, tc.to)
		if tc.want == "" {
			assert.Empty(t, errs, "%s -> %s", tc.from, tc.to)
		} else {
			assert.ErrorContains(t, errs.ToAggregate(), tc.want, "%s -> %s", tc.from, tc.to)
		}
	}
}

func TestEtcdScaleDownCountsRunningMembers(t *testing.T) {
	old := &v1alpha1.HostedControlPlane{}
	old.Spec.Etcd.Replicas = ptr.To[int32](3)
	old.Status.Etcd.Members = []string{"etcd-0", "etcd-1", "etcd-2", "etcd-3", "etcd-4"} // a scale-down still in progress
	hcp := old.DeepCopy()
	assert.ErrorContains(t, validateEtcdScaleDown(field.NewPath("r"), old, hcp).ToAggregate(),
		"cannot lower etcd members from 5 to 3 without consent")
	hcp.Annotations = map[string]string{v1alpha1.AllowEtcdScaleDownAnnotation: "true"}
	assert.Empty(t, validateEtcdScaleDown(field.NewPath("r"), old, hcp))
}

func TestVolumeNeverShrinksBelowWhatAutoGrowReached(t *testing.T) {
	old := &v1alpha1.HostedControlPlane{}
	old.Spec.Etcd.AutoGrow = ptr.To(true)
	old.Status.Etcd.VolumeSize = ptr.To(resource.MustParse("12Gi"))
	hcp := old.DeepCopy()
	hcp.Spec.Etcd.AutoGrow = ptr.To(false)
	hcp.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("10Gi"))
	assert.ErrorContains(t, validateVolumeGrowth(field.NewPath("v"), old, hcp).ToAggregate(),
		"cannot shrink etcd volumes from 12Gi to 10Gi")
	hcp.Spec.Etcd.VolumeSize = ptr.To(resource.MustParse("12Gi"))
	assert.Empty(t, validateVolumeGrowth(field.NewPath("v"), old, hcp))
}

func TestCertSANs(t *testing.T) {
	ok := []string{"api.example.com", "*.example.com", "10.0.0.1", "2001:db8::1", "localhost"}
	assert.Empty(t, validateCertSANs(field.NewPath("sans"), ok))
	bad := []string{"", "api example.com", "-api.example.com", "*.*.example.com", "http://api.example.com"}
	assert.Len(t, validateCertSANs(field.NewPath("sans"), bad), len(bad))
}

func TestTemplateErrorsPointIntoTheTemplate(t *testing.T) {
	tmpl := &v1alpha1.HostedControlPlaneTemplate{}
	tmpl.Spec.Template.Spec.Gateway = &v1alpha1.GatewayReference{Name: "gw"}
	tmpl.Spec.Template.Spec.Exposure = &v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort}
	errs := validateTemplate(tmpl)
	require.Len(t, errs, 2)
	assert.Equal(t, "spec.template.spec.gateway.namespace", errs[0].Field)
	assert.Equal(t, "spec.template.spec.exposure", errs[1].Field)
}
