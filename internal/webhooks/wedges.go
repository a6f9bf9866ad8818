package webhooks

import (
	"fmt"
	"net"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// The checks here refuse values that the objects they end up in would
// refuse, so that nothing accepted here fails only when the controller
// applies it, where a user would find it late, and where a field that
// cannot change once set would hold the control plane for good.

// validatePods checks what every component's pods carry: a priority class
// name the API server accepts, requests within limits, and at least one
// controller-manager and scheduler, without which a workload cluster runs
// no controller or schedules no pod.
func validatePods(path *field.Path, s *v1alpha1.ControlPlaneSettings) field.ErrorList {
	deployment := path.Child("deployment")
	classes := []struct {
		path  *field.Path
		value string
	}{
		{deployment.Child("apiServer", "priorityClassName"), s.Deployment.APIServer.PriorityClassName},
		{deployment.Child("controllerManager", "priorityClassName"), s.Deployment.ControllerManager.PriorityClassName},
		{deployment.Child("scheduler", "priorityClassName"), s.Deployment.Scheduler.PriorityClassName},
		{path.Child("etcd", "priorityClassName"), s.Etcd.PriorityClassName},
		{path.Child("konnectivityClient", "priorityClassName"), s.KonnectivityClient.PriorityClassName},
		{path.Child("coredns", "priorityClassName"), s.CoreDNS.PriorityClassName},
		{path.Child("kubeProxy", "priorityClassName"), s.KubeProxy.PriorityClassName},
	}
	var errs field.ErrorList
	for _, c := range classes {
		if c.value == "" {
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(c.value) {
			errs = append(errs, field.Invalid(c.path, c.value, "must be a PriorityClass name: "+msg))
		}
	}
	for _, c := range []struct {
		path     *field.Path
		replicas *int32
		does     string
	}{
		{deployment.Child("controllerManager", "replicas"), s.Deployment.ControllerManager.Replicas, "runs the workload cluster's controllers"},
		{deployment.Child("scheduler", "replicas"), s.Deployment.Scheduler.Replicas, "schedules the workload cluster's pods"},
	} {
		if c.replicas != nil && *c.replicas < 1 {
			errs = append(errs, field.Invalid(c.path, *c.replicas,
				"must be at least 1: nothing else "+c.does+"; leave it unset for the default"))
		}
	}
	return errs
}

// validateResources refuses a request above its limit, which the API
// server refuses in the pods the controller renders.
func validateResources(path *field.Path, r *corev1.ResourceRequirements) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	names := make([]string, 0, len(r.Requests))
	for name := range r.Requests {
		names = append(names, string(name))
	}
	slices.Sort(names)
	for _, name := range names {
		request := r.Requests[corev1.ResourceName(name)]
		limit, limited := r.Limits[corev1.ResourceName(name)]
		if limited && request.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(name), request.String(),
				fmt.Sprintf("must be at most the limit (%s)", limit.String())))
		}
	}
	return errs
}

// validateStorageClassName: a StorageClass name, which the etcd volume
// claims carry.
func validateStorageClassName(path *field.Path, name *string) field.ErrorList {
	if name == nil {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(*name) {
		errs = append(errs, field.Invalid(path, *name, "must be a StorageClass name: "+msg))
	}
	return errs
}

// validEndpointHost is whether host is an IP address or a DNS name, which
// the serving certificate and every kubeconfig carry.
func validEndpointHost(host string) bool {
	return net.ParseIP(host) != nil || len(validation.IsDNS1123Subdomain(host)) == 0
}

func validateEndpointHost(path *field.Path, host string) field.ErrorList {
	if host == "" || validEndpointHost(host) {
		return nil
	}
	return field.ErrorList{field.Invalid(path, host, "must be a DNS name such as api.example.com or an IP address")}
}
