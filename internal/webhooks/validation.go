package webhooks

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// minCADuration is the shortest lifetime accepted for a certificate
// authority: anything shorter leaves no room to rotate the leaves it signs.
const minCADuration = 24 * time.Hour

// ValidateSettings checks the part of a control plane spec that a
// HostedControlPlane and a HostedControlPlaneTemplate share. It checks what
// the CRD schema cannot express; the schema checks types, enums and bounds.
func ValidateSettings(path *field.Path, s *v1alpha1.ControlPlaneSettings) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateExposure(path, s)...)
	errs = append(errs, validateCertSANs(path.Child("apiServer", "certSANs"), s.APIServer.CertSANs)...)

	deployment := path.Child("deployment")
	errs = append(errs, validateArgs(deployment.Child("apiServer", "args"), s.Deployment.APIServer.Args)...)
	errs = append(errs, validateArgs(deployment.Child("apiServer", "konnectivity", "args"), s.Deployment.APIServer.Konnectivity.Args)...)
	errs = append(errs, validateArgs(deployment.Child("controllerManager", "args"), s.Deployment.ControllerManager.Args)...)
	errs = append(errs, validateArgs(deployment.Child("scheduler", "args"), s.Deployment.Scheduler.Args)...)
	errs = append(errs, validateArgs(path.Child("konnectivityClient", "args"), s.KonnectivityClient.Args)...)
	errs = append(errs, validateArgs(path.Child("coredns", "args"), s.CoreDNS.Args)...)
	errs = append(errs, validateArgs(path.Child("kubeProxy", "args"), s.KubeProxy.Args)...)

	errs = append(errs, validateEtcd(path.Child("etcd"), &s.Etcd)...)
	errs = append(errs, validateCertificates(path.Child("certificates"), &s.Certificates)...)
	return errs
}

func validateExposure(path *field.Path, s *v1alpha1.ControlPlaneSettings) field.ErrorList {
	if s.Gateway == nil {
		return nil
	}
	var errs field.ErrorList
	gw := path.Child("gateway")
	if s.Gateway.Name == "" {
		errs = append(errs, field.Required(gw.Child("name"),
			"name the Gateway whose TLS passthrough listener serves this control plane, or remove spec.gateway"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(s.Gateway.Name) {
			errs = append(errs, field.Invalid(gw.Child("name"), s.Gateway.Name, "must be a Gateway name: "+msg))
		}
	}
	if s.Gateway.Namespace == "" {
		errs = append(errs, field.Required(gw.Child("namespace"),
			"set the namespace of the Gateway named in spec.gateway.name"))
	} else {
		for _, msg := range validation.IsDNS1123Label(s.Gateway.Namespace) {
			errs = append(errs, field.Invalid(gw.Child("namespace"), s.Gateway.Namespace, "must be a namespace name: "+msg))
		}
	}
	if s.Exposure != nil {
		errs = append(errs, field.Forbidden(path.Child("exposure"),
			"exposure applies only without a gateway; set either spec.gateway or spec.exposure, not both"))
	}
	return errs
}

func validateCertSANs(path *field.Path, sans []string) field.ErrorList {
	var errs field.ErrorList
	for i, san := range sans {
		if net.ParseIP(san) != nil {
			continue
		}
		name := strings.TrimPrefix(san, "*.")
		if len(validation.IsDNS1123Subdomain(name)) > 0 {
			errs = append(errs, field.Invalid(path.Index(i), san,
				"must be a DNS name (for example api.example.com or *.example.com) or an IP address"))
		}
	}
	return errs
}

func validateArgs(path *field.Path, args map[string]string) field.ErrorList {
	var errs field.ErrorList
	for name := range args {
		if name == "" || strings.HasPrefix(name, "-") || strings.ContainsAny(name, "= ") {
			errs = append(errs, field.Invalid(path.Key(name), name,
				`must be a flag name without leading dashes, spaces or "=" (for example "v" for --v)`))
		}
	}
	return errs
}

func validateEtcd(path *field.Path, etcd *v1alpha1.EtcdSpec) field.ErrorList {
	var errs field.ErrorList
	if ptr.Deref(etcd.AutoGrow, false) && etcd.VolumeSize != nil {
		errs = append(errs, field.Forbidden(path.Child("volumeSize"),
			"a fixed volumeSize cannot be combined with autoGrow: remove volumeSize to let the controller size the volumes, or set autoGrow to false"))
	}
	if etcd.VolumeSize != nil && etcd.VolumeSize.Sign() <= 0 {
		errs = append(errs, field.Invalid(path.Child("volumeSize"), etcd.VolumeSize.String(),
			"must be a positive size such as 2Gi"))
	}
	errs = append(errs, validateArgs(path.Child("args"), etcd.Args)...)
	if etcd.Backup != nil {
		backup := path.Child("backup")
		if _, err := cron.ParseStandard(etcd.Backup.Schedule); err != nil {
			errs = append(errs, field.Invalid(backup.Child("schedule"), etcd.Backup.Schedule,
				fmt.Sprintf("must be a cron schedule with five fields (for example \"0 3 * * *\") or a descriptor such as @daily: %v", err)))
		}
		for _, msg := range validation.IsDNS1123Subdomain(etcd.Backup.Secret.Name) {
			errs = append(errs, field.Invalid(backup.Child("secret", "name"), etcd.Backup.Secret.Name, "must be a Secret name: "+msg))
		}
	}
	return errs
}

func validateCertificates(path *field.Path, c *v1alpha1.CertificatesSpec) field.ErrorList {
	var errs field.ErrorList
	root, ca := c.RootCACertificateDuration, c.CACertificateDuration
	if root != nil && root.Duration < minCADuration {
		errs = append(errs, field.Invalid(path.Child("rootCaCertificateDuration"), root.Duration.String(),
			"must be at least 24h"))
	}
	if ca != nil && ca.Duration < minCADuration {
		errs = append(errs, field.Invalid(path.Child("caCertificateDuration"), ca.Duration.String(),
			"must be at least 24h"))
	}
	if root != nil && ca != nil && root.Duration < ca.Duration {
		errs = append(errs, field.Invalid(path.Child("rootCaCertificateDuration"), root.Duration.String(),
			fmt.Sprintf("must be at least caCertificateDuration (%s): a root cannot expire before the authorities it signs", ca.Duration)))
	}
	return errs
}

// ValidateHostedControlPlane checks a HostedControlPlane on its own.
func ValidateHostedControlPlane(hcp *v1alpha1.HostedControlPlane) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if _, err := v1alpha1.ParseVersion(hcp.Spec.Version); err != nil {
		errs = append(errs, field.Invalid(spec.Child("version"), hcp.Spec.Version,
			"must be a semantic version such as v1.36.3"))
	}
	errs = append(errs, ValidateSettings(spec, &hcp.Spec.ControlPlaneSettings)...)
	if hcp.Spec.Gateway == nil && hcp.Spec.Exposure != nil && hcp.Spec.Exposure.Type == v1alpha1.ExposureClusterIP &&
		hcp.Spec.ControlPlaneEndpoint.Host == "" {
		errs = append(errs, field.Required(spec.Child("controlPlaneEndpoint", "host"),
			"exposure type ClusterIP needs the address you route to the API server Service; set spec.controlPlaneEndpoint host and port"))
	}
	return errs
}

// ValidateHostedControlPlaneUpdate checks the change from old to hcp: version
// moves, immutable fields and changes that would lose data.
func ValidateHostedControlPlaneUpdate(old, hcp *v1alpha1.HostedControlPlane) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateVersionChange(spec.Child("version"), old.Spec.Version, hcp.Spec.Version)

	if old.Spec.ControlPlaneEndpoint.Host != "" && hcp.Spec.ControlPlaneEndpoint != old.Spec.ControlPlaneEndpoint {
		errs = append(errs, immutable(spec.Child("controlPlaneEndpoint"),
			fmt.Sprintf("%s:%d", old.Spec.ControlPlaneEndpoint.Host, old.Spec.ControlPlaneEndpoint.Port),
			"workers and kubeconfigs already point at it"))
	}
	if !apiequality.Semantic.DeepEqual(old.Spec.Gateway, hcp.Spec.Gateway) {
		errs = append(errs, immutable(spec.Child("gateway"), gatewayString(old.Spec.Gateway),
			"it decides the API server's endpoint"))
	}
	if exposureType(old) != exposureType(hcp) {
		errs = append(errs, immutable(spec.Child("exposure", "type"), string(exposureType(old)),
			"it decides the API server's endpoint"))
	}
	if !apiequality.Semantic.DeepEqual(old.Spec.Etcd.StorageClassName, hcp.Spec.Etcd.StorageClassName) {
		errs = append(errs, immutable(spec.Child("etcd", "storageClassName"),
			ptr.Deref(old.Spec.Etcd.StorageClassName, "(cluster default)"), "existing etcd volumes cannot move"))
	}
	errs = append(errs, validateEtcdScaleDown(spec.Child("etcd", "replicas"), old, hcp)...)
	errs = append(errs, validateVolumeGrowth(spec.Child("etcd", "volumeSize"), old, hcp)...)
	return errs
}

func immutable(path *field.Path, was, why string) *field.Error {
	return field.Forbidden(path, fmt.Sprintf("cannot change once set (was %s): %s; create a new control plane instead", was, why))
}

func gatewayString(gw *v1alpha1.GatewayReference) string {
	if gw == nil {
		return "unset"
	}
	return gw.Namespace + "/" + gw.Name
}

func exposureType(hcp *v1alpha1.HostedControlPlane) v1alpha1.ExposureType {
	if hcp.Spec.Gateway != nil {
		return "Gateway"
	}
	if hcp.Spec.Exposure == nil || hcp.Spec.Exposure.Type == "" {
		return v1alpha1.ExposureLoadBalancer
	}
	return hcp.Spec.Exposure.Type
}

func validateVersionChange(path *field.Path, oldVersion, newVersion string) field.ErrorList {
	if oldVersion == newVersion {
		return nil
	}
	from, err := v1alpha1.ParseVersion(oldVersion)
	if err != nil {
		return nil // a stored version that does not parse may move to any valid one
	}
	to, err := v1alpha1.ParseVersion(newVersion)
	if err != nil {
		return nil // reported by ValidateHostedControlPlane
	}
	switch {
	case to.LT(from):
		return field.ErrorList{field.Forbidden(path,
			fmt.Sprintf("cannot downgrade from %s to %s: Kubernetes supports upgrades only; set %s or later", oldVersion, newVersion, oldVersion))}
	case to.Major != from.Major:
		return field.ErrorList{field.Forbidden(path,
			fmt.Sprintf("cannot change the major version from %s to %s", oldVersion, newVersion))}
	case to.Minor > from.Minor+1:
		return field.ErrorList{field.Forbidden(path,
			fmt.Sprintf("cannot skip a minor version from %s to %s: upgrade to v%d.%d.x first", oldVersion, newVersion, from.Major, from.Minor+1))}
	}
	return nil
}

func validateEtcdScaleDown(path *field.Path, old, hcp *v1alpha1.HostedControlPlane) field.ErrorList {
	// The running size is what the controller reports; before it reports
	// anything, the size asked for so far.
	want := int(ptr.Deref(hcp.Spec.Etcd.Replicas, 0))
	have := len(old.Status.Etcd.Members)
	if have == 0 {
		have = int(ptr.Deref(old.Spec.Etcd.Replicas, 0))
	}
	if want == 0 || want >= have || hcp.Annotations[v1alpha1.AllowEtcdScaleDownAnnotation] == "true" {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
		"cannot lower etcd members from %d to %d without consent: removing members risks quorum and data; "+
			"to proceed, take a backup and set the annotation %s: \"true\"",
		have, want, v1alpha1.AllowEtcdScaleDownAnnotation))}
}

func validateVolumeGrowth(path *field.Path, old, hcp *v1alpha1.HostedControlPlane) field.ErrorList {
	want := hcp.Spec.Etcd.VolumeSize
	if want == nil {
		return nil
	}
	for _, had := range []*resource.Quantity{old.Spec.Etcd.VolumeSize, old.Status.Etcd.VolumeSize} {
		if had != nil && want.Cmp(*had) < 0 {
			return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
				"cannot shrink etcd volumes from %s to %s: volumes only grow; set %s or more", had, want, had))}
		}
	}
	return nil
}
