package render

import (
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Labels returns the labels of an object of component (without the
// component labels for objects of the whole control plane).
func (in Input) Labels(component string) map[string]string {
	labels := map[string]string{
		clusterv1.ClusterNameLabel: in.ClusterName(),
		contract.ControlPlaneLabel: in.ControlPlane.Name,
		contract.ManagedByLabel:    contract.ManagedBy,
	}
	if component != "" {
		labels[contract.ComponentLabel] = component
		labels[contract.InstanceLabel] = in.ClusterName()
	}
	return labels
}

// Selector selects the pods of component.
func (in Input) Selector(component string) map[string]string {
	return map[string]string{contract.ComponentLabel: component, contract.InstanceLabel: in.ClusterName()}
}

// SelectorString is Selector in label query syntax, sorted.
func (in Input) SelectorString(component string) string {
	sel := in.Selector(component)
	parts := make([]string, 0, len(sel))
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		parts = append(parts, k+"="+sel[k])
	}
	return strings.Join(parts, ",")
}

// Meta is the ObjectMeta of an object named name of component, owned by the
// control plane.
func (in Input) Meta(name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       in.Namespace(),
		Labels:          in.Labels(component),
		OwnerReferences: []metav1.OwnerReference{in.ownerRef()},
	}
}

func (in Input) ownerRef() metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion:         v1alpha1.GroupVersion.String(),
		Kind:               "HostedControlPlane",
		Name:               in.ControlPlane.Name,
		UID:                in.ControlPlane.UID,
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}
