package topology

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// endpointPath is where an infrastructure cluster template keeps the
// control plane endpoint, by the Cluster API contract.
var endpointPath = []string{"spec", "template", "spec", "controlPlaneEndpoint"}

// Gateway is the Gateway the variables name, with its namespace defaulted to
// the Cluster's; nil when gatewayName is unset.
func (v Values) Gateway(clusterNamespace string) *v1alpha1.GatewayReference {
	if v.GatewayName == "" {
		return nil
	}
	ns := v.GatewayNamespace
	if ns == "" {
		ns = clusterNamespace
	}
	return &v1alpha1.GatewayReference{Name: v.GatewayName, Namespace: ns}
}

// Apply sets every variable that has a value on the settings of a control
// plane template; the others leave the template as it is.
func (v Values) Apply(s *v1alpha1.ControlPlaneSettings, clusterNamespace string) {
	if v.ControlPlaneReplicas != nil {
		s.Replicas = v.ControlPlaneReplicas
	}
	if gw := v.Gateway(clusterNamespace); gw != nil {
		s.Gateway = gw
	}
	if v.CertSANs != nil {
		s.APIServer.CertSANs = v.CertSANs
	}
	if v.EtcdReplicas != nil {
		s.Etcd.Replicas = v.EtcdReplicas
	}
	if v.EtcdVolumeSize != nil {
		s.Etcd.VolumeSize = v.EtcdVolumeSize
	}
	if b := v.EtcdBackup; b != nil {
		backup := &v1alpha1.EtcdBackup{
			Schedule:       b.Schedule,
			RetentionCount: b.RetentionCount,
			Secret:         v1alpha1.EtcdBackupSecret{Name: b.SecretName},
		}
		if b.SecretNamespace != "" {
			backup.Secret.Namespace = &b.SecretNamespace
		}
		s.Etcd.Backup = backup
	}
}

// SetEndpoint sets the control plane endpoint of an infrastructure cluster
// template, if the template has spec.template.spec.controlPlaneEndpoint; it
// reports whether it did.
func SetEndpoint(t *unstructured.Unstructured, ep clusterv1.APIEndpoint) (bool, error) {
	current, found, err := unstructured.NestedFieldNoCopy(t.Object, endpointPath...)
	if err != nil || !found {
		return false, err
	}
	endpoint, _ := current.(map[string]any)
	if current != nil && endpoint == nil {
		return false, fmt.Errorf("%s %s: spec.template.spec.controlPlaneEndpoint is %T, not an object", t.GetKind(), t.GetName(), current)
	}
	if endpoint == nil {
		endpoint = map[string]any{}
	}
	endpoint["host"] = ep.Host
	endpoint["port"] = int64(ep.Port)
	return true, unstructured.SetNestedField(t.Object, endpoint, endpointPath...)
}
