package etcd

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// TargetFor finds the etcd of a Cluster in the management cluster: the
// members' addresses from the EndpointSlices of its client Service (port
// "client") and the health-check client certificate from its Secret.
func TargetFor(ctx context.Context, r client.Reader, cluster types.NamespacedName) (Target, error) {
	creds, err := credentials(ctx, r, cluster)
	if err != nil {
		return Target{}, err
	}
	endpoints, err := readyEndpoints(ctx, r, types.NamespacedName{
		Namespace: cluster.Namespace, Name: contract.EtcdName(cluster.Name),
	})
	if err != nil {
		return Target{}, err
	}
	return Target{
		Cluster:     cluster,
		ServerName:  contract.EtcdServerName(cluster.Name, cluster.Namespace),
		Endpoints:   endpoints,
		Credentials: creds,
	}, nil
}

// PodsTarget is the etcd of a Cluster as the controller reaches it: each
// member's pod by its address, whether it is ready or not (a learner that
// catches up is not), with the health-check client certificate. Names maps
// the endpoints to their pods.
func PodsTarget(ctx context.Context, r client.Reader, cluster types.NamespacedName, pods []corev1.Pod) (Target, error) {
	creds, err := credentials(ctx, r, cluster)
	if err != nil {
		return Target{}, err
	}
	t := Target{
		Cluster:     cluster,
		ServerName:  contract.EtcdServerName(cluster.Name, cluster.Namespace),
		Credentials: creds,
		Names:       map[string]string{},
	}
	for i := range pods {
		p := &pods[i]
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		ep := net.JoinHostPort(p.Status.PodIP, strconv.Itoa(contract.EtcdClientPort))
		t.Endpoints = append(t.Endpoints, ep)
		t.Names[ep] = p.Name
	}
	slices.Sort(t.Endpoints)
	return t, nil
}

// credentials are the health-check client certificate, and the CA it
// verifies the members with: while a rotation of the etcd CA has members
// present certificates of the old CA or of the new, the trust bundle
// (contract.EtcdTrustSecretName), which holds both.
func credentials(ctx context.Context, r client.Reader, cluster types.NamespacedName) (render.Credentials, error) {
	name := types.NamespacedName{Namespace: cluster.Namespace, Name: contract.EtcdHealthcheckSecretName(cluster.Name)}
	secret := &corev1.Secret{}
	if err := r.Get(ctx, name, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return render.Credentials{}, fmt.Errorf("client certificate Secret %s does not exist", name)
		}
		return render.Credentials{}, fmt.Errorf("read client certificate Secret %s: %w", name, err)
	}
	creds := render.CredentialsFrom(secret.Data)
	if key := creds.Missing(); key != "" {
		return render.Credentials{}, fmt.Errorf("client certificate Secret %s has no %s", name, key)
	}
	trust := &corev1.Secret{}
	err := r.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: contract.EtcdTrustSecretName(cluster.Name)}, trust)
	switch {
	case err == nil && len(trust.Data[render.CAKey]) > 0:
		creds.CA = trust.Data[render.CAKey]
	case err != nil && !apierrors.IsNotFound(err):
		return render.Credentials{}, fmt.Errorf("read the etcd CA's trust bundle: %w", err)
	}
	return creds, nil
}

// readyEndpoints lists host:port of every ready endpoint of the Service,
// sorted. Members that are not ready are left out here and reported by the
// member list as not answering.
func readyEndpoints(ctx context.Context, r client.Reader, service types.NamespacedName) ([]string, error) {
	list := &discoveryv1.EndpointSliceList{}
	if err := r.List(ctx, list, client.InNamespace(service.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: service.Name}); err != nil {
		return nil, fmt.Errorf("list EndpointSlices of Service %s: %w", service, err)
	}
	var endpoints []string
	for i := range list.Items {
		endpoints = append(endpoints, sliceEndpoints(&list.Items[i])...)
	}
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("no ready endpoint with port %q in the EndpointSlices of Service %s",
			contract.EtcdClientPortName, service)
	}
	return sortedUnique(endpoints), nil
}

func sliceEndpoints(slice *discoveryv1.EndpointSlice) []string {
	port := clientPort(slice)
	if port == 0 {
		return nil
	}
	var out []string
	for _, e := range slice.Endpoints {
		if e.Conditions.Ready != nil && !*e.Conditions.Ready {
			continue
		}
		for _, addr := range e.Addresses {
			out = append(out, net.JoinHostPort(addr, strconv.Itoa(int(port))))
		}
	}
	return out
}

func clientPort(slice *discoveryv1.EndpointSlice) int32 {
	for _, p := range slice.Ports {
		if p.Name != nil && *p.Name == contract.EtcdClientPortName && p.Port != nil {
			return *p.Port
		}
	}
	return 0
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
