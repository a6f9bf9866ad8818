package etcd

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Members are the names of the members whose pods exist, ready or not (the
// running size admission protects), sorted.
func Members(pods []corev1.Pod) []string {
	var members []string
	for _, p := range pods {
		members = append(members, p.Name)
	}
	slices.Sort(members)
	return members
}

// VolumeSize is the smallest storage capacity among the members' bound
// claims, nil when none is bound.
func VolumeSize(claims []corev1.PersistentVolumeClaim) *resource.Quantity {
	var smallest *resource.Quantity
	for _, c := range claims {
		q, ok := c.Status.Capacity[corev1.ResourceStorage]
		if !ok || c.Status.Phase != corev1.ClaimBound {
			continue
		}
		if smallest == nil || q.Cmp(*smallest) < 0 {
			smallest = &q
		}
	}
	return smallest
}
