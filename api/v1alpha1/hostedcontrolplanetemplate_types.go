package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=hostedcontrolplanetemplates,scope=Namespaced,categories=cluster-api,shortName=hcpt
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=control-plane-hosted-control-plane"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.template.spec.replicas`,description="API server replicas of control planes made from this template"
// +kubebuilder:printcolumn:name="Gateway",type=string,JSONPath=`.spec.template.spec.gateway.name`,description="Gateway that serves the control planes"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// HostedControlPlaneTemplate is the HostedControlPlane a ClusterClass stamps
// out for each of its Clusters.
type HostedControlPlaneTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec HostedControlPlaneTemplateSpec `json:"spec"`
}

// HostedControlPlaneTemplateSpec holds the template.
type HostedControlPlaneTemplateSpec struct {
	// template is the HostedControlPlane to create.
	// +required
	Template HostedControlPlaneTemplateResource `json:"template"`
}

// HostedControlPlaneTemplateResource is the metadata and spec of the
// HostedControlPlanes made from a template.
type HostedControlPlaneTemplateResource struct {
	// metadata is added to each HostedControlPlane.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec of each HostedControlPlane, except its version.
	// +required
	Spec HostedControlPlaneTemplateResourceSpec `json:"spec"`
}

// HostedControlPlaneTemplateResourceSpec is a HostedControlPlane spec without
// its version.
// +kubebuilder:validation:XValidation:rule="!has(self.version)",fieldPath=".version",message="version is not allowed in a template: the Cluster's spec.topology.version sets it; remove it"
type HostedControlPlaneTemplateResourceSpec struct {
	// version must stay unset: a ClusterClass takes it from the Cluster's
	// spec.topology.version. The field exists so that a template that sets it
	// is rejected instead of silently stripped.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version,omitempty"`

	ControlPlaneSettings `json:",inline"`
}

// +kubebuilder:object:root=true

// HostedControlPlaneTemplateList is a list of HostedControlPlaneTemplates.
type HostedControlPlaneTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostedControlPlaneTemplate `json:"items"`
}
