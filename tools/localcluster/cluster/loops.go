package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// runLoops does what a cloud provider does for the cluster until ctx ends:
// LoadBalancer Services get an address, claims of the default StorageClass
// get a host-path volume, and released volumes are removed.
func (c *Cluster) runLoops(ctx context.Context) {
	for ctx.Err() == nil {
		if err := c.allocateAddresses(ctx); err != nil && ctx.Err() == nil {
			c.logf("load balancer addresses: %v", err)
		}
		if err := c.provisionVolumes(ctx); err != nil && ctx.Err() == nil {
			c.logf("volumes: %v", err)
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

// provisionVolumes makes a host-path PersistentVolume, bound to its claim,
// for every pending claim of the default StorageClass, and deletes released
// volumes with their directories.
func (c *Cluster) provisionVolumes(ctx context.Context) error {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := c.Client.List(ctx, claims); err != nil {
		return err
	}
	for i := range claims.Items {
		pvc := &claims.Items[i]
		if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" ||
			ptr.Deref(pvc.Spec.StorageClassName, "") != StorageClass {
			continue
		}
		if err := c.provision(ctx, pvc); err != nil {
			return err
		}
	}
	volumes := &corev1.PersistentVolumeList{}
	if err := c.Client.List(ctx, volumes); err != nil {
		return err
	}
	for i := range volumes.Items {
		pv := &volumes.Items[i]
		if pv.Status.Phase != corev1.VolumeReleased || pv.Annotations["pv.kubernetes.io/provisioned-by"] != provisioner {
			continue
		}
		if err := os.RemoveAll(pv.Spec.HostPath.Path); err != nil {
			return err
		}
		if err := client.IgnoreNotFound(c.Client.Delete(ctx, pv)); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	name := "pvc-" + string(pvc.UID)
	path := filepath.Join(c.layout.path("volumes"), name)
	// Pods write here as whatever user they run as.
	if err := os.MkdirAll(path, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(path, 0o777); err != nil { //nolint:gosec // see above
		return err
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              StorageClass,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(corev1.HostPathDirectory)},
			},
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
			},
		},
	}
	return client.IgnoreAlreadyExists(c.Client.Create(ctx, pv))
}
