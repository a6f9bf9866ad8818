package apiserverconfig

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	auditvalidation "k8s.io/apiserver/pkg/apis/audit/validation"
	"k8s.io/apiserver/pkg/audit"
	"sigs.k8s.io/yaml"
)

// AuditPolicyYAML is the audit policy as the API server reads it, with its
// apiVersion and kind, which the API server requires.
func AuditPolicyYAML(policy auditv1.Policy) ([]byte, error) {
	policy.APIVersion, policy.Kind = auditv1.SchemeGroupVersion.String(), "Policy"
	data, err := yaml.Marshal(&policy)
	if err != nil {
		return nil, fmt.Errorf("encode the audit policy: %w", err)
	}
	return data, nil
}

// ValidateAuditPolicy refuses a policy the API server would not load: one
// that its validation refuses (an unknown level or stage, a malformed
// group or URL) or that has no rules, which the API server refuses to
// start with.
func ValidateAuditPolicy(path *field.Path, policy *auditv1.Policy) field.ErrorList {
	internal := &auditinternal.Policy{}
	if err := audit.Scheme.Convert(policy, internal, nil); err != nil {
		return field.ErrorList{field.Invalid(path, "<policy>", fmt.Sprintf("is no audit.k8s.io/v1 Policy: %v", err))}
	}
	if len(internal.Rules) == 0 {
		return field.ErrorList{field.Required(path.Child("rules"),
			"the API server loads no audit policy without rules; add at least one, such as {level: Metadata}")}
	}
	var errs field.ErrorList
	for _, e := range auditvalidation.ValidatePolicy(internal) {
		out := *e
		out.Field = path.String() + "." + e.Field
		errs = append(errs, &out)
	}
	return errs
}
