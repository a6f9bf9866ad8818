package webhooks

import (
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// +kubebuilder:webhook:path=/mutate-controlplane-cluster-x-k8s-io-v1alpha1-hostedcontrolplane,mutating=true,failurePolicy=fail,sideEffects=None,groups=controlplane.cluster.x-k8s.io,resources=hostedcontrolplanes,verbs=create;update,versions=v1alpha1,name=default.hostedcontrolplane.controlplane.cluster.x-k8s.io,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-controlplane-cluster-x-k8s-io-v1alpha1-hostedcontrolplane,mutating=false,failurePolicy=fail,sideEffects=None,groups=controlplane.cluster.x-k8s.io,resources=hostedcontrolplanes,verbs=create;update,versions=v1alpha1,name=validate.hostedcontrolplane.controlplane.cluster.x-k8s.io,admissionReviewVersions=v1

// HostedControlPlane defaults and validates HostedControlPlanes.
type HostedControlPlane struct {
	// MinBackupInterval is the platform's MIN_BACKUP_INTERVAL: the least
	// time between two runs of a backup schedule. Zero allows any schedule
	// that runs.
	MinBackupInterval time.Duration
	// AllowedRegistries are those image overrides may pull from; any when
	// empty.
	AllowedRegistries contract.Registries
}

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

// ValidateCreate checks a new HostedControlPlane, and warns about args that
// weaken its security.
func (w HostedControlPlane) ValidateCreate(_ context.Context, hcp *v1alpha1.HostedControlPlane) (admission.Warnings, error) {
	errs := append(ValidateHostedControlPlaneCreate(hcp), w.validatePolicy(hcp)...)
	return controlPlaneWarnings(hcp), invalid("HostedControlPlane", hcp.Name, errs)
}

// ValidateUpdate checks a HostedControlPlane and its change from old. What
// old already broke is not refused again (see newErrors), nor warned about.
func (w HostedControlPlane) ValidateUpdate(_ context.Context, old, hcp *v1alpha1.HostedControlPlane) (admission.Warnings, error) {
	errs := newErrors(append(ValidateHostedControlPlane(old), w.validatePolicy(old)...),
		append(ValidateHostedControlPlane(hcp), w.validatePolicy(hcp)...))
	errs = append(errs, ValidateHostedControlPlaneUpdate(old, hcp)...)
	warnings := newWarnings(controlPlaneWarnings(old), controlPlaneWarnings(hcp))
	return warnings, invalid("HostedControlPlane", hcp.Name, errs)
}

// validatePolicy checks what the platform's settings allow.
func (w HostedControlPlane) validatePolicy(hcp *v1alpha1.HostedControlPlane) field.ErrorList {
	spec := field.NewPath("spec")
	return append(ValidateBackupInterval(spec, &hcp.Spec.ControlPlaneSettings, w.MinBackupInterval),
		DisallowedImages(spec, &hcp.Spec.ControlPlaneSettings, w.AllowedRegistries)...)
}

func controlPlaneWarnings(hcp *v1alpha1.HostedControlPlane) admission.Warnings {
	return append(SettingsWarnings(field.NewPath("spec"), &hcp.Spec.ControlPlaneSettings), ReferenceWarnings(hcp)...)
}

// ValidateDelete allows every delete; the controller's finalizer takes care
// of what must happen first.
func (HostedControlPlane) ValidateDelete(context.Context, *v1alpha1.HostedControlPlane) (admission.Warnings, error) {
	return nil, nil
}

// +kubebuilder:webhook:path=/validate-controlplane-cluster-x-k8s-io-v1alpha1-hostedcontrolplanetemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=controlplane.cluster.x-k8s.io,resources=hostedcontrolplanetemplates,verbs=create;update,versions=v1alpha1,name=validate.hostedcontrolplanetemplate.controlplane.cluster.x-k8s.io,admissionReviewVersions=v1

// HostedControlPlaneTemplate validates HostedControlPlaneTemplates. Their
// defaults come from the CRD schema.
type HostedControlPlaneTemplate struct {
	// MinBackupInterval and AllowedRegistries are as HostedControlPlane's.
	MinBackupInterval time.Duration
	AllowedRegistries contract.Registries
}

// SetupWithManager registers the webhook with the manager's webhook server.
func (w HostedControlPlaneTemplate) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &v1alpha1.HostedControlPlaneTemplate{}).WithValidator(w).Complete()
}

// ValidateCreate checks a new template.
func (w HostedControlPlaneTemplate) ValidateCreate(_ context.Context, t *v1alpha1.HostedControlPlaneTemplate) (admission.Warnings, error) {
	return templateWarnings(t), invalid("HostedControlPlaneTemplate", t.Name, w.validate(t))
}

// ValidateUpdate checks a changed template, refusing only what old did not
// already break.
func (w HostedControlPlaneTemplate) ValidateUpdate(_ context.Context, old, t *v1alpha1.HostedControlPlaneTemplate) (admission.Warnings, error) {
	warnings := newWarnings(templateWarnings(old), templateWarnings(t))
	return warnings, invalid("HostedControlPlaneTemplate", t.Name, newErrors(w.validate(old), w.validate(t)))
}

// ValidateDelete allows every delete.
func (HostedControlPlaneTemplate) ValidateDelete(context.Context, *v1alpha1.HostedControlPlaneTemplate) (admission.Warnings, error) {
	return nil, nil
}

func (w HostedControlPlaneTemplate) validate(t *v1alpha1.HostedControlPlaneTemplate) field.ErrorList {
	s := &t.Spec.Template.Spec.ControlPlaneSettings
	errs := append(ValidateTemplateSettings(templateSpecPath, s), ValidateBackupInterval(templateSpecPath, s, w.MinBackupInterval)...)
	return append(errs, DisallowedImages(templateSpecPath, s, w.AllowedRegistries)...)
}

func templateWarnings(t *v1alpha1.HostedControlPlaneTemplate) admission.Warnings {
	return SettingsWarnings(templateSpecPath, &t.Spec.Template.Spec.ControlPlaneSettings)
}

var templateSpecPath = field.NewPath("spec", "template", "spec")

// newErrors are the errors of an updated object that the stored one did
// not already have. A rule added in a later release then refuses new input,
// but never an unrelated change (a finalizer, a scale, the controller
// filling in the endpoint) of an object stored before it, as the API
// server's own CRD validation ratchets.
func newErrors(stored, errs field.ErrorList) field.ErrorList {
	had := map[string]bool{}
	for _, e := range stored {
		had[e.Error()] = true
	}
	var fresh field.ErrorList
	for _, e := range errs {
		if !had[e.Error()] {
			fresh = append(fresh, e)
		}
	}
	return fresh
}

// newWarnings are the warnings of an updated object that the stored one did
// not already earn, so an update warns about what it changes.
func newWarnings(stored, warnings admission.Warnings) admission.Warnings {
	var fresh admission.Warnings
	for _, w := range warnings {
		if !slices.Contains(stored, w) {
			fresh = append(fresh, w)
		}
	}
	return fresh
}

// invalid turns field errors into the API's Invalid status, or nil.
func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind(kind).GroupKind(), name, errs)
}
