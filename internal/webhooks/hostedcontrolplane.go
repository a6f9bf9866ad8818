package webhooks

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// +kubebuilder:webhook:path=/mutate-controlplane-cluster-x-k8s-io-v1alpha1-hostedcontrolplane,mutating=true,failurePolicy=fail,sideEffects=None,groups=controlplane.cluster.x-k8s.io,resources=hostedcontrolplanes,verbs=create;update,versions=v1alpha1,name=default.hostedcontrolplane.controlplane.cluster.x-k8s.io,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-controlplane-cluster-x-k8s-io-v1alpha1-hostedcontrolplane,mutating=false,failurePolicy=fail,sideEffects=None,groups=controlplane.cluster.x-k8s.io,resources=hostedcontrolplanes,verbs=create;update,versions=v1alpha1,name=validate.hostedcontrolplane.controlplane.cluster.x-k8s.io,admissionReviewVersions=v1

// HostedControlPlane defaults and validates HostedControlPlanes.
type HostedControlPlane struct{}

// SetupWithManager registers the webhooks with the manager's webhook server.
func (w HostedControlPlane) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &v1alpha1.HostedControlPlane{}).
		WithDefaulter(w).WithValidator(w).Complete()
}

// DefaultReplicas is the number of API servers of a HostedControlPlane that
// does not say.
const DefaultReplicas = 2

// Default adds the "v" that Cluster API expects in front of a version such
// as 1.36.3, and two API servers when replicas is unset. Anything else is
// left for validation to reject as typed. The replicas default lives here,
// not in the schema, because the schema is shared with
// HostedControlPlaneTemplate, where a default would stop ClusterClass
// patches from setting replicas.
func (HostedControlPlane) Default(_ context.Context, hcp *v1alpha1.HostedControlPlane) error {
	if v := hcp.Spec.Version; v != "" && v[0] >= '0' && v[0] <= '9' {
		hcp.Spec.Version = "v" + v
	}
	if hcp.Spec.Replicas == nil {
		hcp.Spec.Replicas = ptr.To[int32](DefaultReplicas)
	}
	return nil
}

// ValidateCreate checks a new HostedControlPlane.
func (HostedControlPlane) ValidateCreate(_ context.Context, hcp *v1alpha1.HostedControlPlane) (admission.Warnings, error) {
	return nil, invalid("HostedControlPlane", hcp.Name, ValidateHostedControlPlane(hcp))
}

// ValidateUpdate checks a HostedControlPlane and its change from old.
func (HostedControlPlane) ValidateUpdate(_ context.Context, old, hcp *v1alpha1.HostedControlPlane) (admission.Warnings, error) {
	errs := ValidateHostedControlPlane(hcp)
	errs = append(errs, ValidateHostedControlPlaneUpdate(old, hcp)...)
	return nil, invalid("HostedControlPlane", hcp.Name, errs)
}

// ValidateDelete allows every delete; the controller's finalizer takes care
// of what must happen first.
func (HostedControlPlane) ValidateDelete(context.Context, *v1alpha1.HostedControlPlane) (admission.Warnings, error) {
	return nil, nil
}

// +kubebuilder:webhook:path=/validate-controlplane-cluster-x-k8s-io-v1alpha1-hostedcontrolplanetemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=controlplane.cluster.x-k8s.io,resources=hostedcontrolplanetemplates,verbs=create;update,versions=v1alpha1,name=validate.hostedcontrolplanetemplate.controlplane.cluster.x-k8s.io,admissionReviewVersions=v1

// HostedControlPlaneTemplate validates HostedControlPlaneTemplates. Their
// defaults come from the CRD schema.
type HostedControlPlaneTemplate struct{}

// SetupWithManager registers the webhook with the manager's webhook server.
func (w HostedControlPlaneTemplate) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &v1alpha1.HostedControlPlaneTemplate{}).WithValidator(w).Complete()
}

// ValidateCreate checks a new template.
func (HostedControlPlaneTemplate) ValidateCreate(_ context.Context, t *v1alpha1.HostedControlPlaneTemplate) (admission.Warnings, error) {
	return nil, invalid("HostedControlPlaneTemplate", t.Name, validateTemplate(t))
}

// ValidateUpdate checks a changed template.
func (HostedControlPlaneTemplate) ValidateUpdate(_ context.Context, _, t *v1alpha1.HostedControlPlaneTemplate) (admission.Warnings, error) {
	return nil, invalid("HostedControlPlaneTemplate", t.Name, validateTemplate(t))
}

// ValidateDelete allows every delete.
func (HostedControlPlaneTemplate) ValidateDelete(context.Context, *v1alpha1.HostedControlPlaneTemplate) (admission.Warnings, error) {
	return nil, nil
}

func validateTemplate(t *v1alpha1.HostedControlPlaneTemplate) field.ErrorList {
	return ValidateSettings(field.NewPath("spec", "template", "spec"), &t.Spec.Template.Spec.ControlPlaneSettings)
}

// invalid turns field errors into the API's Invalid status, or nil.
func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind(kind).GroupKind(), name, errs)
}
