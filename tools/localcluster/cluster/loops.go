package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// runLoops does what a cloud provider does for the cluster until ctx ends:
// LoadBalancer Services get an address, claims of the default StorageClass
// get a volume of their size, grown when they ask for more, and released
// volumes are removed (see provisionVolumes), and infrastructure clusters
// are provisioned (see provisionInfrastructure).
func (c *Cluster) runLoops(ctx context.Context) {
	for ctx.Err() == nil {
		if err := c.allocateAddresses(ctx); err != nil && ctx.Err() == nil {
			c.logf("load balancer addresses: %v", err)
		}
		if err := c.provisionVolumes(ctx); err != nil && ctx.Err() == nil {
			c.logf("volumes: %v", err)
		}
		if err := c.provisionInfrastructure(ctx); err != nil && ctx.Err() == nil {
			c.logf("infrastructure clusters: %v", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// LoadBalancerIPAnnotation on a LoadBalancer Service asks for one address
// of LoadBalancerCIDR, as MetalLB's loadBalancerIPs annotation does: the
// allocator gives it no other and hands it to no other Service.
const LoadBalancerIPAnnotation = "e2e.hostedcp.io/load-balancer-ip"

// allocateAddresses gives each LoadBalancer Service without an address the
// one it asks for (LoadBalancerIPAnnotation) or the lowest free one of
// LoadBalancerCIDR; kube-proxy then serves it, and the bridge route makes
// it reachable from the host.
func (c *Cluster) allocateAddresses(ctx context.Context) error {
	services := &corev1.ServiceList{}
	if err := c.Client.List(ctx, services); err != nil {
		return err
	}
	pool := netip.MustParsePrefix(LoadBalancerCIDR)
	// given are the addresses Services have; taken also those asked for.
	given, taken := map[netip.Addr]bool{}, map[netip.Addr]bool{}
	var pending []*corev1.Service
	for i := range services.Items {
		svc := &services.Items[i]
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			pending = append(pending, svc)
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil {
				given[a], taken[a] = true, true
			}
		}
		if a, err := netip.ParseAddr(svc.Annotations[LoadBalancerIPAnnotation]); err == nil {
			taken[a] = true
		}
	}
	next := pool.Addr().Next()
	var errs []error
	for _, svc := range pending {
		addr, asked := svc.Annotations[LoadBalancerIPAnnotation]
		ip, err := netip.ParseAddr(addr)
		switch {
		case asked && (err != nil || !pool.Contains(ip)):
			errs = append(errs, fmt.Errorf("service %s/%s asks for %q, not an address of %s", svc.Namespace, svc.Name, addr, LoadBalancerCIDR))
			continue
		case asked && given[ip]:
			errs = append(errs, fmt.Errorf("service %s/%s asks for %s, which another Service has", svc.Namespace, svc.Name, ip))
			continue
		case !asked:
			for taken[next] {
				next = next.Next()
			}
			if !pool.Contains(next) {
				return errors.Join(append(errs, fmt.Errorf("no address left in %s for Service %s/%s", LoadBalancerCIDR, svc.Namespace, svc.Name))...)
			}
			ip = next
		}
		given[ip], taken[ip] = true, true
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip.String(), IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
		if err := c.Client.Status().Update(ctx, svc); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LocalClusterKind is the infrastructure cluster of a hosted cluster in
// this cluster (provider/manifests/infrastructure.yaml): a Cluster whose
// infrastructureRef names one has its infrastructure provisioned at once,
// the local cluster being the infrastructure, so that Cluster API reports
// InfrastructureReady and Available as on a cloud.
var LocalClusterKind = schema.GroupVersionKind{Group: "infrastructure.e2e.hostedcp.io", Version: "v1alpha1", Kind: "LocalCluster"}

// provisionInfrastructure marks every LocalCluster provisioned, as Cluster
// API's contract for infrastructure clusters has it
// (status.initialization.provisioned); nothing before the CRD is installed.
func (c *Cluster) provisionInfrastructure(ctx context.Context) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(LocalClusterKind.GroupVersion().WithKind(LocalClusterKind.Kind + "List"))
	if err := c.Client.List(ctx, list); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil
		}
		return err
	}
	var errs []error
	for i := range list.Items {
		lc := &list.Items[i]
		if done, _, _ := unstructured.NestedBool(lc.Object, "status", "initialization", "provisioned"); done {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"initialization":{"provisioned":true}}}`))
		if err := c.Client.Status().Patch(ctx, lc, patch); err != nil {
			errs = append(errs, fmt.Errorf("LocalCluster %s/%s: %w", lc.GetNamespace(), lc.GetName(), err))
		}
	}
	return errors.Join(errs...)
}
