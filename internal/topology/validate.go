package topology

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/webhooks"
)

var (
	// variablesPath is where a user sets the variables.
	variablesPath = field.NewPath("spec", "topology", "variables")
	// templateSpecPath is the control plane settings in a template.
	templateSpecPath = field.NewPath("spec", "template", "spec")
)

// variableFields maps each variable to the template field it sets, so that
// a rule broken by a value names the variable that carried it. rename maps
// the template's sub-fields to the variable's where their names differ.
var variableFields = []struct {
	name, field string
	rename      map[string]string
}{
	{name: VarControlPlaneReplicas, field: "spec.template.spec.replicas"},
	{name: VarGatewayName, field: "spec.template.spec.gateway.name"},
	{name: VarGatewayNamespace, field: "spec.template.spec.gateway.namespace"},
	{name: VarCertSANs, field: "spec.template.spec.apiServer.certSANs"},
	{name: VarEtcdReplicas, field: "spec.template.spec.etcd.replicas"},
	{name: VarEtcdVolumeSize, field: "spec.template.spec.etcd.volumeSize"},
	{name: VarEtcdBackup, field: "spec.template.spec.etcd.backup", rename: map[string]string{
		".secret.name": ".secretName", ".secret.namespace": ".secretNamespace",
	}},
}

// ValidateTopology rejects what cannot work once patched: the rules the
// HostedControlPlane admission applies, combinations of variables that
// contradict each other, and a Gateway that cannot serve the control plane.
func (h *Handlers) ValidateTopology(ctx context.Context, req *runtimehooksv1.ValidateTopologyRequest, resp *runtimehooksv1.ValidateTopologyResponse) {
	items := make([]item, 0, len(req.Items))
	for _, i := range req.Items {
		items = append(items, item{holder: i.HolderReference, raw: i.Object.Raw})
	}
	in, err := h.readRequest(req.Variables, items)
	if err != nil {
		fail(resp, err)
		return
	}
	errs, err := h.validate(ctx, in)
	switch {
	case err != nil:
		fail(resp, err)
	case len(errs) > 0:
		fail(resp, errs.ToAggregate())
	default:
		resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	}
}

func (h *Handlers) validate(ctx context.Context, in request) (field.ErrorList, error) {
	errs := validateValues(in.values)
	if in.template == nil {
		return errs, nil
	}
	s := &in.template.Spec.Template.Spec.ControlPlaneSettings
	settings := append(webhooks.ValidateTemplateSettings(templateSpecPath, s), webhooks.ValidateBackupInterval(templateSpecPath, s, h.MinBackupInterval)...)
	errs = append(errs, attribute(settings, in.values)...)
	gwErrs, err := h.validateGateway(ctx, in)
	return append(errs, gwErrs...), err
}

// validateValues checks what the variable schemas cannot: values that
// contradict each other or that no etcd cluster should have.
func validateValues(v Values) field.ErrorList {
	var errs field.ErrorList
	if v.GatewayNamespace != "" && v.GatewayName == "" {
		errs = append(errs, field.Invalid(variablesPath.Key(VarGatewayNamespace), v.GatewayNamespace,
			"names the namespace of a Gateway, but gatewayName is not set: set gatewayName too, or remove gatewayNamespace"))
	}
	if n := v.EtcdReplicas; n != nil && *n%2 == 0 {
		errs = append(errs, field.Invalid(variablesPath.Key(VarEtcdReplicas), *n, fmt.Sprintf(
			"must be odd: %d etcd members tolerate no more failures than %d, and need more of them for a quorum; use 1, 3 or 5",
			*n, *n-1)))
	}
	seen := map[string]bool{}
	for i, san := range v.CertSANs {
		if seen[san] {
			errs = append(errs, field.Duplicate(variablesPath.Key(VarCertSANs).Index(i), san))
		}
		seen[san] = true
	}
	return errs
}

// attribute renames the fields of errors found in the patched template to
// the variables that set them, so users see what to change in their Cluster.
func attribute(errs field.ErrorList, v Values) field.ErrorList {
	for _, e := range errs {
		for _, vf := range variableFields {
			suffix, ok := strings.CutPrefix(e.Field, vf.field)
			if !ok || !v.has(vf.name) || (suffix != "" && suffix[0] != '.' && suffix[0] != '[') {
				continue
			}
			if renamed, ok := vf.rename[suffix]; ok {
				suffix = renamed
			}
			e.Field = variablesPath.Key(vf.name).String() + suffix
			break
		}
	}
	return errs
}

// has reports whether the variable was set.
func (v Values) has(name string) bool {
	switch name {
	case VarControlPlaneReplicas:
		return v.ControlPlaneReplicas != nil
	case VarGatewayName:
		return v.GatewayName != ""
	case VarGatewayNamespace:
		return v.GatewayNamespace != ""
	case VarCertSANs:
		return v.CertSANs != nil
	case VarEtcdReplicas:
		return v.EtcdReplicas != nil
	case VarEtcdVolumeSize:
		return v.EtcdVolumeSize != nil
	case VarEtcdBackup:
		return v.EtcdBackup != nil
	}
	return false
}

// validateGateway checks that the Gateway exists, has a listener that can
// serve API servers, and gives the cluster a valid DNS name. An incomplete
// reference is left to the template's own validation.
func (h *Handlers) validateGateway(ctx context.Context, in request) (field.ErrorList, error) {
	gw := in.gateway()
	if gw == nil || gw.Name == "" || gw.Namespace == "" {
		return nil, nil
	}
	path := templateSpecPath.Child("gateway")
	if in.values.GatewayName != "" {
		path = variablesPath.Key(VarGatewayName)
	}
	name := types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
	listener, err := ResolveGateway(ctx, h.Reader, name)
	var gwErr *GatewayError
	if errors.As(err, &gwErr) {
		return field.ErrorList{field.Invalid(path, name.String(), gwErr.Reason)}, nil
	}
	if err != nil {
		return nil, err
	}
	host := listener.Endpoint(in.cluster.Name, in.cluster.Namespace).Host
	if msgs := validation.IsDNS1123Subdomain(host); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(path, name.String(), fmt.Sprintf(
			"gives the API server the name %q, which is not a valid DNS name (%s): use a shorter Cluster name, namespace or Gateway hostname",
			host, strings.Join(msgs, "; ")))}, nil
	}
	return nil, nil
}
