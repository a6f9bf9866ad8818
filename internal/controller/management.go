package controller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ManagementAPIServer are the addresses where pods reach the management
// cluster's API server: the kubernetes Service's ClusterIPs and the
// addresses of its endpoints, which kube-proxy translates them to and which
// a pod can also dial directly. Hosted pods' egress policies leave them out
// (render.Input.Outside). They are read once, when the controller starts:
// an API server that moves to new addresses later is left out again after
// the controller restarts. A policy engine that knows the API server by
// identity (Cilium's kube-apiserver entity) needs no addresses.
func ManagementAPIServer(ctx context.Context, c client.Reader) ([]string, error) {
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceDefault, Name: "kubernetes"}, svc); err != nil {
		return nil, fmt.Errorf("read the management cluster's kubernetes Service: %w", err)
	}
	addrs := slices.Clone(svc.Spec.ClusterIPs)
	list := &discoveryv1.EndpointSliceList{}
	if err := c.List(ctx, list, client.InNamespace(corev1.NamespaceDefault),
		client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return nil, fmt.Errorf("list the management cluster's kubernetes EndpointSlices: %w", err)
	}
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			addrs = append(addrs, e.Addresses...)
		}
	}
	slices.Sort(addrs)
	return slices.Compact(addrs), nil
}
