package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// LoadBalancerHostnamesLabel, "true" on a Namespace, makes its
// LoadBalancer Services report a hostname and no address, as AWS's load
// balancers do: <a>-<b>-<c>-<d>.LoadBalancerDomain, which the DNS the
// host, the workers and pods ask resolves to a.b.c.d (see
// manifests/coredns.yaml). That address belongs to a Service the allocator
// makes beside each such Service, with its selector and ports, named after
// it with "-lb" and owned by it: the load balancer's own data path, given
// an address of LoadBalancerCIDR and served by kube-proxy like any other
// (kube-proxy serves the addresses of a Service's status only, never a
// hostname). Label the Namespace before making its Services.
const LoadBalancerHostnamesLabel = "e2e.hostedcp.io/load-balancer-hostnames"

// loadBalancerOfLabel names, on the Service that serves the address of a
// Service reporting a hostname, that Service.
const loadBalancerOfLabel = "e2e.hostedcp.io/load-balancer-of"

// allocateAddresses gives each LoadBalancer Service without an address the
// one it asks for (LoadBalancerIPAnnotation) or the lowest free one of
// LoadBalancerCIDR; kube-proxy then serves it, and the bridge route makes
// it reachable from the host. Services of a Namespace with
// LoadBalancerHostnamesLabel get a hostname instead (see nameLoadBalancer).
func (c *Cluster) allocateAddresses(ctx context.Context) error {
	services := &corev1.ServiceList{}
	if err := c.Client.List(ctx, services); err != nil {
		return err
	}
	namespaces := &corev1.NamespaceList{}
	if err := c.Client.List(ctx, namespaces, client.MatchingLabels{LoadBalancerHostnamesLabel: "true"}); err != nil {
		return err
	}
	hostnames := map[string]bool{}
	for _, ns := range namespaces.Items {
		hostnames[ns.Name] = true
	}
	pool := netip.MustParsePrefix(LoadBalancerCIDR)
	// given are the addresses Services have; taken also those asked for.
	given, taken := map[netip.Addr]bool{}, map[netip.Addr]bool{}
	var pending, named []*corev1.Service
	byKey := map[client.ObjectKey]*corev1.Service{}
	for i := range services.Items {
		svc := &services.Items[i]
		byKey[client.ObjectKeyFromObject(svc)] = svc
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		if hostnames[svc.Namespace] && svc.Labels[loadBalancerOfLabel] == "" {
			named = append(named, svc)
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
	for _, svc := range named {
		errs = append(errs, c.nameLoadBalancer(ctx, svc, byKey[client.ObjectKey{Namespace: svc.Namespace, Name: svc.Name + "-lb"}]))
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

// nameLoadBalancer makes or updates lb, the Service that serves svc's
// address (nil while there is none), and once lb has its address reports
// that address's name in svc's status, as its only ingress.
func (c *Cluster) nameLoadBalancer(ctx context.Context, svc, lb *corev1.Service) error {
	ports := make([]corev1.ServicePort, 0, len(svc.Spec.Ports))
	for _, p := range svc.Spec.Ports {
		ports = append(ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: p.TargetPort})
	}
	if lb == nil {
		return c.Client.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: svc.Namespace, Name: svc.Name + "-lb", Labels: map[string]string{loadBalancerOfLabel: svc.Name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}},
			},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: svc.Spec.Selector, Ports: ports},
		})
	}
	if lb.Labels[loadBalancerOfLabel] != svc.Name {
		return fmt.Errorf("service %s/%s is in the way of the load balancer of Service %s", lb.Namespace, lb.Name, svc.Name)
	}
	current := make([]corev1.ServicePort, 0, len(lb.Spec.Ports))
	for _, p := range lb.Spec.Ports {
		current = append(current, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: p.TargetPort})
	}
	if !equality.Semantic.DeepEqual(current, ports) || !equality.Semantic.DeepEqual(lb.Spec.Selector, svc.Spec.Selector) {
		lb.Spec.Selector, lb.Spec.Ports = svc.Spec.Selector, ports
		return c.Client.Update(ctx, lb)
	}
	for _, in := range lb.Status.LoadBalancer.Ingress {
		ip, err := netip.ParseAddr(in.IP)
		if err != nil {
			continue
		}
		want := []corev1.LoadBalancerIngress{{Hostname: LoadBalancerHostname(ip)}}
		if equality.Semantic.DeepEqual(svc.Status.LoadBalancer.Ingress, want) {
			return nil
		}
		svc.Status.LoadBalancer.Ingress = want
		return c.Client.Status().Update(ctx, svc)
	}
	return nil
}

// loadBalancerMatch is what CoreDNS's template plugin matches a question
// for a name of LoadBalancerHostname with; its groups are the address's
// four numbers.
var loadBalancerMatch = "^([0-9]+)-([0-9]+)-([0-9]+)-([0-9]+)[.]" + strings.ReplaceAll(LoadBalancerDomain, ".", "[.]") + "[.]$"

// LoadBalancerHostname is the name under LoadBalancerDomain that resolves
// to ip.
func LoadBalancerHostname(ip netip.Addr) string {
	return strings.ReplaceAll(ip.String(), ".", "-") + "." + LoadBalancerDomain
}
