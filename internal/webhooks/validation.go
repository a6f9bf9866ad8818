package webhooks

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/rotation"
)

// ValidateSettings checks the part of a control plane spec that a
// HostedControlPlane and a HostedControlPlaneTemplate share. It checks what
// the CRD schema cannot express; the schema checks types, enums and bounds.
func ValidateSettings(path *field.Path, s *v1alpha1.ControlPlaneSettings) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateExposure(path, s)...)
	errs = append(errs, validateCertSANs(path.Child("apiServer", "certSANs"), s.APIServer.CertSANs)...)
	for _, c := range containers(path, s) {
		errs = append(errs, c.validate()...)
	}
	errs = append(errs, validateEtcd(path.Child("etcd"), &s.Etcd)...)
	errs = append(errs, validateCertificates(path.Child("certificates"), &s.Certificates)...)
	errs = append(errs, validatePods(path, s)...)
	errs = append(errs, validateTokenLifetime(path.Child("deployment", "apiServer", "args"), s.Deployment.APIServer.Args)...)
	return append(errs, validateAPIServerFiles(path, s)...)
}

// ValidateTemplateSettings checks the settings of a
// HostedControlPlaneTemplate, as a template and as ClusterClass patches
// leave it: ValidateSettings, and no restore, which a template shared by
// every Cluster of a ClusterClass cannot express for one of them.
func ValidateTemplateSettings(path *field.Path, s *v1alpha1.ControlPlaneSettings) field.ErrorList {
	errs := ValidateSettings(path, s)
	if s.Etcd.Restore != nil {
		errs = append(errs, field.Forbidden(path.Child("etcd", "restore"),
			"not supported yet in a template: a restore is set on the HostedControlPlane of one Cluster, when it is created"))
	}
	return errs
}

// SettingsWarnings are the args that weaken the security of a component,
// which admission allows but warns about.
func SettingsWarnings(path *field.Path, s *v1alpha1.ControlPlaneSettings) []string {
	var warnings []string
	for _, c := range containers(path, s) {
		warnings = append(warnings, c.warnings()...)
	}
	return warnings
}

func validateExposure(path *field.Path, s *v1alpha1.ControlPlaneSettings) field.ErrorList {
	if s.Gateway == nil {
		return nil
	}
	var errs field.ErrorList
	gw := path.Child("gateway")
	errs = append(errs, objectName(gw.Child("name"), s.Gateway.Name, "Gateway", validation.IsDNS1123Subdomain,
		"name the Gateway whose TLS passthrough listener serves this control plane, or remove spec.gateway")...)
	errs = append(errs, objectName(gw.Child("namespace"), s.Gateway.Namespace, "namespace", validation.IsDNS1123Label,
		"set the namespace of the Gateway named in spec.gateway.name")...)
	if s.Exposure != nil {
		errs = append(errs, field.Forbidden(path.Child("exposure"),
			"exposure applies only without a gateway; set either spec.gateway or spec.exposure, not both"))
	}
	return errs
}

// objectName checks the name (or namespace) of an object a control plane
// refers to: required says what to set when it is empty, and every way it
// fails check is told as not being a name of kind.
func objectName(path *field.Path, value, kind string, check func(string) []string, required string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(path, required)}
	}
	var errs field.ErrorList
	for _, msg := range check(value) {
		errs = append(errs, field.Invalid(path, value, "must be a "+kind+" name: "+msg))
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

// MinEtcdVolumeSize and MaxEtcdVolumeSize bound the etcd volumes admission
// accepts. Beside its database etcd needs room for its write-ahead log
// (about 512Mi) and for the copy a defragmentation writes, so a smaller
// volume leaves its quota no room. etcd keeps its database within a few GiB
// (its quota is 2GiB by default and 8GiB the recommended most), so anything
// near a terabyte is a typo.
var (
	MinEtcdVolumeSize = resource.MustParse("1Gi")
	MaxEtcdVolumeSize = resource.MustParse("1Ti")
)

func validateEtcd(path *field.Path, etcd *v1alpha1.EtcdSpec) field.ErrorList {
	var errs field.ErrorList
	if size := etcd.VolumeSize; size != nil {
		switch {
		case size.Cmp(MinEtcdVolumeSize) < 0:
			errs = append(errs, field.Invalid(path.Child("volumeSize"), size.String(), fmt.Sprintf(
				"must be at least %s: beside its database etcd keeps its write-ahead log (about 512Mi) and the copy a defragmentation writes",
				MinEtcdVolumeSize.String())))
		case size.Cmp(MaxEtcdVolumeSize) > 0:
			errs = append(errs, field.Invalid(path.Child("volumeSize"), size.String(), fmt.Sprintf(
				"must be at most %s: etcd keeps its database within a few GiB (8Gi is the most its quota should be), so a larger volume only wastes storage",
				MaxEtcdVolumeSize.String())))
		}
	}
	errs = append(errs, validateAutoGrow(path, etcd)...)
	errs = append(errs, validateStorageClassName(path.Child("storageClassName"), etcd.StorageClassName)...)
	if etcd.Backup != nil {
		errs = append(errs, validateBackup(path.Child("backup"), etcd.Backup)...)
	}
	if etcd.Restore != nil {
		errs = append(errs, validateRestore(path, etcd)...)
	}
	return errs
}

// snapshotKey is a snapshot's object key as the backup controller names it:
// an optional prefix, then <namespace>/<cluster>/<UTC time>-rev<revision>.db.
var snapshotKey = regexp.MustCompile(`^([^/]+/)*[a-z0-9][a-z0-9.-]*/[a-z0-9][a-z0-9.-]*/\d{8}T\d{6}\.\d{3}Z-rev\d+\.db$`)

// snapshotAllowed says what names a snapshot to restore.
const snapshotAllowed = `must be "latest" or an object key as status.etcd.lastBackupKey shows it, such as "ns/name/20260102T030405.000Z-rev1234.db"`

// validSnapshotKey is whether key is a snapshot's key, within the store's
// folders.
func validSnapshotKey(key string) bool {
	return snapshotKey.MatchString(key) && !strings.Contains(key, "/../") && !strings.HasPrefix(key, "../")
}

// validateRotateRequest checks the rotate annotation of a control plane.
func validateRotateRequest(hcp *v1alpha1.HostedControlPlane) field.ErrorList {
	value, asked := hcp.Annotations[v1alpha1.RotateAnnotation]
	if !asked {
		return nil
	}
	path := field.NewPath("metadata", "annotations").Key(v1alpha1.RotateAnnotation)
	keys, unknown := rotation.Requests(value)
	if len(unknown) > 0 || len(keys) == 0 {
		return field.ErrorList{field.Invalid(path, value, "must be "+rotation.Allowed)}
	}
	return nil
}

// validateDropOldKeyRequest checks the annotation that drops the old
// service account key without waiting for its tokens.
func validateDropOldKeyRequest(hcp *v1alpha1.HostedControlPlane) field.ErrorList {
	if value, asked := hcp.Annotations[v1alpha1.DropOldServiceAccountKeyAnnotation]; asked && value != "true" {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations").Key(v1alpha1.DropOldServiceAccountKeyAnnotation), value,
			`must be "true", which drops the old service account key of the rotation under way without waiting for its tokens to expire; remove the annotation to wait`)}
	}
	return nil
}

// validateRestoreRequest checks the restore-etcd annotation of a control
// plane, which asks for a restore in place.
func validateRestoreRequest(hcp *v1alpha1.HostedControlPlane) field.ErrorList {
	value, asked := hcp.Annotations[v1alpha1.RestoreEtcdAnnotation]
	if !asked {
		return nil
	}
	path := field.NewPath("metadata", "annotations").Key(v1alpha1.RestoreEtcdAnnotation)
	var errs field.ErrorList
	if value != v1alpha1.LatestSnapshot && !validSnapshotKey(value) {
		errs = append(errs, field.Invalid(path, value, snapshotAllowed))
	}
	if hcp.Spec.Etcd.Backup == nil {
		errs = append(errs, field.Forbidden(path,
			"needs spec.etcd.backup: the snapshot is read from the store that spec.etcd.backup.secret names; set spec.etcd.backup with that secret"))
	}
	return errs
}

// validateRestore checks spec.etcd.restore, at path spec.etcd.
func validateRestore(path *field.Path, etcd *v1alpha1.EtcdSpec) field.ErrorList {
	restore := path.Child("restore")
	var errs field.ErrorList
	if etcd.Backup == nil {
		errs = append(errs, field.Forbidden(restore,
			"needs spec.etcd.backup: the snapshot is read from the store that spec.etcd.backup.secret names; set spec.etcd.backup with that secret"))
	}
	snapshot := etcd.Restore.Snapshot
	switch {
	case snapshot == "" || snapshot == v1alpha1.LatestSnapshot:
	case !validSnapshotKey(snapshot):
		errs = append(errs, field.Invalid(restore.Child("snapshot"), snapshot, snapshotAllowed))
	case etcd.Restore.FromCluster != "":
		errs = append(errs, field.Forbidden(restore.Child("fromCluster"),
			`applies only to snapshot "latest": a snapshot's key already names the folder of its cluster; remove fromCluster or set snapshot to "latest"`))
	}
	if from := etcd.Restore.FromCluster; from != "" {
		ns, name, ok := strings.Cut(from, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			errs = append(errs, field.Invalid(restore.Child("fromCluster"), from,
				"must be <namespace>/<name> of the Cluster whose snapshots to look in, such as team-a/prod"))
		}
	}
	return errs
}

// validateAutoGrow: the ceiling of autoGrow is no less than the volumes
// start with and within the volume bounds. Without one, autoGrow stops
// where growing no longer raises the quota (contract.EtcdMaxVolumeSize).
func validateAutoGrow(path *field.Path, etcd *v1alpha1.EtcdSpec) field.ErrorList {
	most := etcd.MaxVolumeSize
	if most == nil {
		return nil
	}
	least := contract.DefaultEtcdVolumeSize
	if etcd.VolumeSize != nil {
		least = *etcd.VolumeSize
	}
	switch {
	case most.Cmp(least) < 0:
		return field.ErrorList{field.Invalid(path.Child("maxVolumeSize"), most.String(), fmt.Sprintf(
			"must be at least volumeSize (%s)", least.String()))}
	case most.Cmp(MaxEtcdVolumeSize) > 0:
		return field.ErrorList{field.Invalid(path.Child("maxVolumeSize"), most.String(), fmt.Sprintf(
			"must be at most %s, as volumeSize", MaxEtcdVolumeSize.String()))}
	}
	return nil
}

func validateBackup(path *field.Path, backup *v1alpha1.EtcdBackup) field.ErrorList {
	errs := validateSchedule(path.Child("schedule"), backup.Schedule)
	secret := path.Child("secret")
	errs = append(errs, objectName(secret.Child("name"), backup.Secret.Name, "Secret", validation.IsDNS1123Subdomain,
		"secret is required: name the Secret that holds the S3 endpoint, bucket and credentials")...)
	if ns := backup.Secret.Namespace; ns != nil {
		for _, msg := range validation.IsDNS1123Label(*ns) {
			errs = append(errs, field.Invalid(secret.Child("namespace"), *ns, "must be a namespace name: "+msg))
		}
	}
	return append(errs, validateSecretKeys(secret, &backup.Secret)...)
}

// validateSecretKeys: each setting of the store comes from a key of its
// own. A Secret shared through a grant is read with keys the tenant chose,
// and were two settings one key, the secret access key could be sent as
// the endpoint's host name or end up in the bucket's prefix of object keys.
func validateSecretKeys(path *field.Path, s *v1alpha1.EtcdBackupSecret) field.ErrorList {
	keys := []struct {
		name     string
		value    *string
		fallback string
	}{
		{"accessKeyIDKey", s.AccessKeyIDKey, "accessKeyID"},
		{"secretAccessKeyKey", s.SecretAccessKeyKey, "secretAccessKey"},
		{"hostKey", s.HostKey, "host"},
		{"regionKey", s.RegionKey, "region"},
		{"bucketKey", s.BucketKey, "bucket"},
		{"caKey", s.CAKey, "ca.crt"},
	}
	var errs field.ErrorList
	usedBy := map[string]string{}
	for _, k := range keys {
		key := ptr.Deref(k.value, k.fallback)
		if msgs := validation.IsConfigMapKey(key); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Child(k.name), key, "must be a key of a Secret's data: "+strings.Join(msgs, "; ")))
		}
		if other, taken := usedBy[key]; taken {
			errs = append(errs, field.Invalid(path.Child(k.name), key, fmt.Sprintf(
				"is also %s: each setting of the store must come from a key of its own", path.Child(other))))
		}
		usedBy[key] = k.name
	}
	return errs
}

// ReferenceWarnings tell of the references of hcp to other namespaces,
// which the controller follows only while a ReferenceGrant there allows
// them: the grant may come later, so admission accepts them.
func ReferenceWarnings(hcp *v1alpha1.HostedControlPlane) []string {
	var warnings []string
	grant := func(field, kind, ns, name string) {
		warnings = append(warnings, fmt.Sprintf("%s names %s %s/%s in another namespace: the controller uses it only while a ReferenceGrant in %s "+
			"allows HostedControlPlanes of namespace %s (group %s) to use %s %s; until then nothing of it is read",
			field, kind, ns, name, ns, hcp.Namespace, v1alpha1.GroupVersion.Group, kind, name))
	}
	etcd := hcp.Spec.Etcd
	if b := etcd.Backup; b != nil && b.Secret.Namespace != nil && *b.Secret.Namespace != hcp.Namespace {
		grant("spec.etcd.backup.secret", "Secret", *b.Secret.Namespace, b.Secret.Name)
	}
	if audit := hcp.Spec.Deployment.APIServer.Audit; audit != nil && audit.Webhook != nil {
		for i, target := range audit.Webhook.Targets {
			if a := target.Authentication; a != nil && a.SecretNamespace != nil && *a.SecretNamespace != hcp.Namespace {
				grant(fmt.Sprintf("spec.deployment.apiServer.audit.webhook.targets[%d].authentication", i), "Secret", *a.SecretNamespace, a.SecretName)
			}
		}
	}
	if r := etcd.Restore; r != nil {
		if ns, name, ok := strings.Cut(r.FromCluster, "/"); ok && ns != hcp.Namespace {
			grant("spec.etcd.restore.fromCluster", "Cluster", ns, name)
		}
	}
	return warnings
}

func validateCertificates(path *field.Path, c *v1alpha1.CertificatesSpec) field.ErrorList {
	var errs field.ErrorList
	root, ca, leaf, kubeconfig := c.RootCACertificateDuration, c.CACertificateDuration, c.LeafCertificateDuration, c.KubeconfigCertificateDuration
	between := func(name string, d *metav1.Duration, lowest, highest time.Duration) {
		switch {
		case d == nil:
		case d.Duration < lowest:
			errs = append(errs, field.Invalid(path.Child(name), d.Duration.String(), "must be at least "+shortDuration(lowest)))
		case highest > 0 && d.Duration > highest:
			errs = append(errs, field.Invalid(path.Child(name), d.Duration.String(), "must be at most "+shortDuration(highest)))
		}
	}
	between("rootCaCertificateDuration", root, contract.MinCADuration, 0)
	between("caCertificateDuration", ca, contract.MinCADuration, 0)
	between("leafCertificateDuration", leaf, contract.MinLeafDuration, contract.MaxLeafDuration)
	between("kubeconfigCertificateDuration", kubeconfig, contract.MinLeafDuration, contract.MaxLeafDuration)
	// An authority cannot sign what outlives it: cert-manager would cut
	// the certificate short, and it would renew sooner than asked.
	outlives := func(name string, d *metav1.Duration, issuer string, issuerDuration *metav1.Duration, what string) {
		if d != nil && issuerDuration != nil && d.Duration > issuerDuration.Duration {
			errs = append(errs, field.Invalid(path.Child(name), d.Duration.String(),
				fmt.Sprintf("must be at most %s (%s): %s", issuer, issuerDuration.Duration, what)))
		}
	}
	if root != nil && ca != nil && root.Duration < ca.Duration {
		errs = append(errs, field.Invalid(path.Child("rootCaCertificateDuration"), root.Duration.String(),
			fmt.Sprintf("must be at least caCertificateDuration (%s): a root cannot expire before the authorities it signs", ca.Duration)))
	}
	outlives("leafCertificateDuration", leaf, "caCertificateDuration", ca, "the etcd and front-proxy CAs sign leaves")
	outlives("leafCertificateDuration", leaf, "rootCaCertificateDuration", root, "the cluster CA signs leaves")
	outlives("kubeconfigCertificateDuration", kubeconfig, "rootCaCertificateDuration", root, "the cluster CA signs the admin certificate")
	return errs
}

// ValidateHostedControlPlane checks a HostedControlPlane on its own.
func ValidateHostedControlPlane(hcp *v1alpha1.HostedControlPlane) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateVersion(spec.Child("version"), hcp.Spec.Version)
	errs = append(errs, ValidateSettings(spec, &hcp.Spec.ControlPlaneSettings)...)
	errs = append(errs, validateRestoreRequest(hcp)...)
	errs = append(errs, validateRotateRequest(hcp)...)
	errs = append(errs, validateDropOldKeyRequest(hcp)...)
	return append(errs, validateEndpoint(spec.Child("controlPlaneEndpoint"), hcp)...)
}

// ValidateHostedControlPlaneCreate checks a new HostedControlPlane: on its
// own, and that it asks for no restore in place, having no etcd yet.
func ValidateHostedControlPlaneCreate(hcp *v1alpha1.HostedControlPlane) field.ErrorList {
	errs := ValidateHostedControlPlane(hcp)
	if _, asked := hcp.Annotations[v1alpha1.RestoreEtcdAnnotation]; asked {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(v1alpha1.RestoreEtcdAnnotation),
			"a new control plane has no etcd to restore in place; set spec.etcd.restore to start it from a snapshot"))
	}
	return errs
}

func validateVersion(path *field.Path, version string) field.ErrorList {
	v, err := v1alpha1.ParseVersion(version)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(path, version, "must be a semantic version such as v1.36.3")}
	case len(v.Build) > 0:
		return field.ErrorList{field.Invalid(path, version,
			`must not carry build metadata (the part after "+"): the version picks the images and labels the pods; use a version such as v1.36.3`)}
	case !v1alpha1.IsSupportedVersion(v):
		return field.ErrorList{field.Invalid(path, version,
			fmt.Sprintf("this release runs Kubernetes %s; choose a version in that range", v1alpha1.SupportedVersions()))}
	}
	if msgs := validation.IsValidLabelValue(version); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(path, version, "must fit a label value, as the API server pods are labelled with it: "+strings.Join(msgs, "; "))}
	}
	return nil
}

// The node ports a NodePort Service may ask for, in a cluster with the
// default --service-node-port-range.
const (
	minNodePort = 30000
	maxNodePort = 32767
)

// validateEndpoint checks the endpoint a user sets against the exposure
// type that serves it; a gateway or a load balancer provides its own.
func validateEndpoint(path *field.Path, hcp *v1alpha1.HostedControlPlane) field.ErrorList {
	ep := hcp.Spec.ControlPlaneEndpoint
	errs := validateEndpointHost(path.Child("host"), ep.Host)
	switch exposureType(hcp) {
	case v1alpha1.ExposureClusterIP:
		if ep.Host == "" {
			errs = append(errs, field.Required(path.Child("host"),
				"exposure type ClusterIP needs the address you route to the API server Service; set spec.controlPlaneEndpoint host and port"))
		}
		if ep.Port == 0 {
			errs = append(errs, field.Required(path.Child("port"),
				"exposure type ClusterIP needs the port you route to the API server Service; set spec.controlPlaneEndpoint host and port"))
		}
	case v1alpha1.ExposureNodePort:
		if ep.Port != 0 && (ep.Port < minNodePort || ep.Port > maxNodePort) {
			errs = append(errs, field.Invalid(path.Child("port"), ep.Port, fmt.Sprintf(
				"with exposure type NodePort the port is the node port the API server Service asks for, so it must be within %d-%d; leave it unset to have one allocated",
				minNodePort, maxNodePort)))
		}
	}
	return errs
}

// ValidateHostedControlPlaneUpdate checks the change from old to hcp: version
// moves, immutable fields and changes that would lose data.
func ValidateHostedControlPlaneUpdate(old, hcp *v1alpha1.HostedControlPlane) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateVersionChange(spec.Child("version"), old.Spec.Version, hcp.Spec.Version)
	errs = append(errs, validateEndpointChange(spec.Child("controlPlaneEndpoint"), old.Spec.ControlPlaneEndpoint, hcp.Spec.ControlPlaneEndpoint)...)
	errs = append(errs, validateServingChange(spec, old, hcp)...)
	// A storage class whose name no StatefulSet accepts never made a volume,
	// so it may still be corrected.
	class := spec.Child("etcd", "storageClassName")
	if !apiequality.Semantic.DeepEqual(old.Spec.Etcd.StorageClassName, hcp.Spec.Etcd.StorageClassName) &&
		len(validateStorageClassName(class, old.Spec.Etcd.StorageClassName)) == 0 {
		errs = append(errs, immutable(class,
			ptr.Deref(old.Spec.Etcd.StorageClassName, "(cluster default)"), "existing etcd volumes cannot move"))
	}
	if old.Spec.ServiceAccountIssuer != "" && hcp.Spec.ServiceAccountIssuer != old.Spec.ServiceAccountIssuer &&
		len(validateServiceAccountIssuer(spec.Child("serviceAccountIssuer"), old.Spec.ServiceAccountIssuer)) == 0 {
		errs = append(errs, immutable(spec.Child("serviceAccountIssuer"), old.Spec.ServiceAccountIssuer,
			"the service account tokens signed for it would be refused"))
	}
	if !apiequality.Semantic.DeepEqual(old.Spec.Etcd.Restore, hcp.Spec.Etcd.Restore) {
		errs = append(errs, field.Forbidden(spec.Child("etcd", "restore"),
			"cannot be added, changed or removed: etcd is restored only before it first starts; set it when creating the control plane"))
	}
	if value, asked := hcp.Annotations[v1alpha1.RestoreEtcdAnnotation]; asked && old.Status.Etcd.Restoring != nil &&
		value != old.Annotations[v1alpha1.RestoreEtcdAnnotation] {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(v1alpha1.RestoreEtcdAnnotation),
			fmt.Sprintf("a restore in place from %s is under way (status.etcd.restoring); ask again once EtcdRestored says it ended", old.Status.Etcd.Restoring.Key)))
	}
	errs = append(errs, validateEtcdScaleDown(spec.Child("etcd", "replicas"), old, hcp)...)
	errs = append(errs, validateVolumeGrowth(spec.Child("etcd", "volumeSize"), old, hcp)...)
	return errs
}

func immutable(path *field.Path, was, why string) *field.Error {
	return field.Forbidden(path, fmt.Sprintf("cannot change once set (was %s): %s; create a new control plane instead", was, why))
}

// validateEndpointChange keeps each part of the endpoint once it is set,
// and lets an unset part be filled: a NodePort control plane gets its port
// once the Service has one, after the user gave the host. A host that is
// no name nor address never reached the API server, so it may be
// corrected.
func validateEndpointChange(path *field.Path, old, ep clusterv1.APIEndpoint) field.ErrorList {
	const why = "workers and kubeconfigs already point at it"
	var errs field.ErrorList
	if old.Host != "" && ep.Host != old.Host && validEndpointHost(old.Host) {
		errs = append(errs, immutable(path.Child("host"), old.Host, why))
	}
	if old.Port != 0 && ep.Port != old.Port {
		errs = append(errs, immutable(path.Child("port"), strconv.Itoa(int(old.Port)), why))
	}
	return errs
}

// validateServingChange keeps what serves the API server, a gateway or a
// Service of the exposure type: workers and kubeconfigs point at its address.
func validateServingChange(spec *field.Path, old, hcp *v1alpha1.HostedControlPlane) field.ErrorList {
	was, is := old.Spec.Gateway, hcp.Spec.Gateway
	switch {
	case was == nil && is != nil:
		return field.ErrorList{field.Forbidden(spec.Child("gateway"), fmt.Sprintf(
			"a gateway cannot be added to a control plane that is already served through %s: workers and kubeconfigs point at its address; create a new control plane to serve one through a gateway",
			serviceDescription(old)))}
	case was != nil && is == nil:
		return field.ErrorList{field.Forbidden(spec.Child("gateway"), fmt.Sprintf(
			"the gateway cannot be removed: the control plane is served through the Gateway %s and workers and kubeconfigs point at its address; create a new control plane to serve one through a Service",
			gatewayString(was)))}
	case was != nil && !apiequality.Semantic.DeepEqual(was, is):
		return field.ErrorList{immutable(spec.Child("gateway"), gatewayString(was), "it decides the API server's endpoint")}
	case was == nil && exposureType(old) != exposureType(hcp):
		return field.ErrorList{immutable(spec.Child("exposure", "type"), exposureTypeString(old), "it decides the API server's endpoint")}
	}
	return nil
}

func gatewayString(gw *v1alpha1.GatewayReference) string { return gw.Namespace + "/" + gw.Name }

// exposureType is the Service type that serves a control plane without a
// gateway, LoadBalancer unless the spec says.
func exposureType(hcp *v1alpha1.HostedControlPlane) v1alpha1.ExposureType {
	if hcp.Spec.Gateway != nil {
		return ""
	}
	if hcp.Spec.Exposure == nil || hcp.Spec.Exposure.Type == "" {
		return v1alpha1.ExposureLoadBalancer
	}
	return hcp.Spec.Exposure.Type
}

// exposureTypeString is the exposure type, marked as the default when the
// user never chose it.
func exposureTypeString(hcp *v1alpha1.HostedControlPlane) string {
	if hcp.Spec.Exposure == nil || hcp.Spec.Exposure.Type == "" {
		return string(v1alpha1.ExposureLoadBalancer) + ", the default"
	}
	return string(hcp.Spec.Exposure.Type)
}

// serviceDescription names the Service that serves a control plane without
// a gateway, and the field that chose it if the user did.
func serviceDescription(hcp *v1alpha1.HostedControlPlane) string {
	if hcp.Spec.Exposure == nil || hcp.Spec.Exposure.Type == "" {
		return "a LoadBalancer Service (the default exposure)"
	}
	return fmt.Sprintf("a %s Service (spec.exposure.type)", hcp.Spec.Exposure.Type)
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
		if had := old.Spec.Etcd.VolumeSize; had != nil {
			return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
				"cannot be removed once set (was %s): volumes only grow, and without it they would be sized at the default %s; set it to at least %s",
				had, contract.DefaultEtcdVolumeSize.String(), had))}
		}
		return nil
	}
	if had := old.Spec.Etcd.VolumeSize; had != nil && want.Cmp(*had) == 0 {
		return nil // unchanged, whatever the volumes became meanwhile
	}
	// Volumes never shrink: the spec goes no lower than the volumes are
	// (status.etcd.volumeSize, the smallest a member has) or, before one is
	// bound, than it was. Down to the volumes it may go back: a growth
	// their StorageClass refused left them as they were.
	floor := old.Spec.Etcd.VolumeSize
	if observed := old.Status.Etcd.VolumeSize; observed != nil {
		floor = observed
	}
	if floor != nil && want.Cmp(*floor) < 0 {
		return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
			"cannot shrink etcd volumes from %s to %s: volumes only grow; set %s or more", floor, want, floor))}
	}
	return nil
}
