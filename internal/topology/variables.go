package topology

import (
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Names of the variables the extension publishes.
const (
	VarControlPlaneReplicas = "controlPlaneReplicas"
	VarGatewayName          = "gatewayName"
	VarGatewayNamespace     = "gatewayNamespace"
	VarCertSANs             = "certSANs"
	VarEtcdReplicas         = "etcdReplicas"
	VarEtcdVolumeSize       = "etcdVolumeSize"
	VarEtcdBackup           = "etcdBackup"
)

// Patterns the variable schemas enforce; the API server checks them before
// any patch runs.
const (
	dnsSubdomainPattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	dnsLabelPattern     = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	quantityPattern     = `^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$`
)

// Variables are the ClusterClass variables the extension publishes through
// DiscoverVariables, in a stable order. Each overrides the matching field
// of the ClusterClass's HostedControlPlaneTemplate when set; none has a
// default, so that an unset variable leaves the template's value.
func Variables() []clusterv1.ClusterClassVariable {
	return []clusterv1.ClusterClassVariable{
		variable(VarControlPlaneReplicas, clusterv1.JSONSchemaProps{
			Type: "integer",
			Description: "Number of kube-apiserver pods of the hosted control plane (spec.replicas); 2 when unset. " +
				"Cluster API keeps the control plane's replicas from Cluster.spec.topology.controlPlane.replicas or from the template " +
				"when either sets them, so this variable is refused together with either.",
			Minimum: ptr.To[int64](1),
			Maximum: ptr.To[int64](64),
			Example: rawJSON(3),
		}),
		variable(VarGatewayName, clusterv1.JSONSchemaProps{
			Type: "string",
			Description: "Name of the Gateway API Gateway that serves the API server (spec.gateway.name). " +
				"It needs a listener with protocol TLS, tls.mode Passthrough and a wildcard hostname such as *.k8s.example.com; " +
				"the API server is then <cluster>.<namespace>.k8s.example.com on that listener's port, " +
				"and that endpoint is also set on the infrastructure cluster when its template has spec.controlPlaneEndpoint.",
			MinLength: ptr.To[int64](1),
			MaxLength: ptr.To[int64](253),
			Pattern:   dnsSubdomainPattern,
			Example:   rawJSON("capi"),
		}),
		variable(VarGatewayNamespace, clusterv1.JSONSchemaProps{
			Type:        "string",
			Description: "Namespace of the Gateway named by gatewayName (spec.gateway.namespace); the Cluster's namespace when unset.",
			MinLength:   ptr.To[int64](1),
			MaxLength:   ptr.To[int64](63),
			Pattern:     dnsLabelPattern,
			Example:     rawJSON("capi-system"),
		}),
		variable(VarCertSANs, clusterv1.JSONSchemaProps{
			Type: "array",
			Description: "Extra DNS names or IP addresses in the API server's serving certificate (spec.apiServer.certSANs); " +
				"replaces the template's list.",
			MaxItems: ptr.To[int64](64),
			Items: &clusterv1.JSONSchemaProps{
				Type:      "string",
				MinLength: ptr.To[int64](1),
				MaxLength: ptr.To[int64](253),
			},
			Example: rawJSON([]string{"api.example.com", "192.0.2.10"}),
		}),
		variable(VarEtcdReplicas, clusterv1.JSONSchemaProps{
			Type: "integer",
			Description: "Number of etcd members (spec.etcd.replicas): 1, 3 or 5; the template's (3 unless it says) when unset. " +
				"An even number tolerates no more failures than the odd number below it.",
			Minimum: ptr.To[int64](1),
			Maximum: ptr.To[int64](5),
			Example: rawJSON(3),
		}),
		variable(VarEtcdVolumeSize, clusterv1.JSONSchemaProps{
			Type:        "string",
			Description: "Size of each etcd member's volume (spec.etcd.volumeSize), such as 2Gi. Volumes only grow; etcd's backend quota follows the size (about (size - size/16 - 512Mi) / 2, at most 8Gi).",
			MaxLength:   ptr.To[int64](32),
			Pattern:     quantityPattern,
			Example:     rawJSON("2Gi"),
		}),
		variable(VarEtcdBackup, backupSchema()),
	}
}

func backupSchema() clusterv1.JSONSchemaProps {
	return clusterv1.JSONSchemaProps{
		Type: "object",
		Description: "Scheduled etcd snapshots into S3 compatible storage (spec.etcd.backup). " +
			"The Secret holds the keys accessKeyID, secretAccessKey, host, region and bucket.",
		Required: []string{"schedule", "secretName"},
		Properties: map[string]clusterv1.JSONSchemaProps{
			"schedule": {
				Type:        "string",
				Description: "When to take a snapshot, in cron format (five fields) or a descriptor such as @daily.",
				MinLength:   ptr.To[int64](1),
				MaxLength:   ptr.To[int64](128),
				Example:     rawJSON("0 3 * * *"),
			},
			"retentionCount": {
				Type:        "integer",
				Description: "How many of the newest snapshots are kept.",
				Minimum:     ptr.To[int64](1),
				Maximum:     ptr.To[int64](1000),
				Default:     rawJSON(7),
			},
			"secretName": {
				Type:        "string",
				Description: "Name of the Secret with the S3 endpoint, bucket and credentials.",
				MinLength:   ptr.To[int64](1),
				MaxLength:   ptr.To[int64](253),
				Pattern:     dnsSubdomainPattern,
			},
			"secretNamespace": {
				Type:        "string",
				Description: "Namespace of the Secret; the control plane's namespace when unset. Another namespace is used only while a ReferenceGrant there allows HostedControlPlanes of the Cluster's namespace to use the Secret.",
				MinLength:   ptr.To[int64](1),
				MaxLength:   ptr.To[int64](63),
				Pattern:     dnsLabelPattern,
			},
		},
	}
}

func variable(name string, schema clusterv1.JSONSchemaProps) clusterv1.ClusterClassVariable {
	return clusterv1.ClusterClassVariable{
		Name:     name,
		Required: ptr.To(false),
		Schema:   clusterv1.VariableSchema{OpenAPIV3Schema: schema},
	}
}

func rawJSON(v any) *apiextensionsv1.JSON {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %v: %v", v, err)) // only called with literals
	}
	return &apiextensionsv1.JSON{Raw: raw}
}

// Values are the variables a Cluster set; nil or empty means unset.
type Values struct {
	ControlPlaneReplicas *int32
	GatewayName          string
	GatewayNamespace     string
	CertSANs             []string
	EtcdReplicas         *int32
	EtcdVolumeSize       *resource.Quantity
	EtcdBackup           *Backup
}

// Backup is the value of the etcdBackup variable.
type Backup struct {
	Schedule        string `json:"schedule"`
	RetentionCount  *int32 `json:"retentionCount,omitempty"`
	SecretName      string `json:"secretName"`
	SecretNamespace string `json:"secretNamespace,omitempty"`
}

// ParseValues reads the extension's variables from the variables of a
// request; others (builtin, the ClusterClass's own) are ignored.
func ParseValues(vars map[string]apiextensionsv1.JSON) (Values, error) {
	var v Values
	var volumeSize *string
	for _, f := range []struct {
		name string
		into any
	}{
		{VarControlPlaneReplicas, &v.ControlPlaneReplicas},
		{VarGatewayName, &v.GatewayName},
		{VarGatewayNamespace, &v.GatewayNamespace},
		{VarCertSANs, &v.CertSANs},
		{VarEtcdReplicas, &v.EtcdReplicas},
		{VarEtcdVolumeSize, &volumeSize},
		{VarEtcdBackup, &v.EtcdBackup},
	} {
		value, ok := vars[f.name]
		if !ok {
			continue
		}
		if err := json.Unmarshal(value.Raw, f.into); err != nil {
			return Values{}, fmt.Errorf("variable %s: cannot read %s: %w", f.name, value.Raw, err)
		}
	}
	if volumeSize != nil {
		q, err := resource.ParseQuantity(*volumeSize)
		if err != nil {
			return Values{}, fmt.Errorf("variable %s: %q is not a size such as 2Gi: %w", VarEtcdVolumeSize, *volumeSize, err)
		}
		v.EtcdVolumeSize = &q
	}
	return v, nil
}
