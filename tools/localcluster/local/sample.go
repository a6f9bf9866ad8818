package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
)

// CreateSample applies the Cluster and HostedControlPlane of file into the
// default namespace, waits until the control plane is Available and writes
// the hosted cluster's admin kubeconfig into dir, returning its path.
func CreateSample(ctx context.Context, c client.Client, file, dir string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	if err := cluster.Apply(ctx, c, b, "default"); err != nil {
		return "", err
	}
	hcps := &v1alpha1.HostedControlPlaneList{}
	if err := c.List(ctx, hcps, client.InNamespace("default")); err != nil {
		return "", err
	}
	if len(hcps.Items) != 1 {
		return "", fmt.Errorf("%s: want one HostedControlPlane in namespace default, found %d", file, len(hcps.Items))
	}
	hcp := &hcps.Items[0]
	if err := WaitAvailable(ctx, c, client.ObjectKeyFromObject(hcp), 15*time.Minute); err != nil {
		return "", err
	}
	name := hcp.Labels["cluster.x-k8s.io/cluster-name"]
	kubeconfig, err := Kubeconfig(ctx, c, client.ObjectKey{Namespace: hcp.Namespace, Name: name})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".kubeconfig")
	return path, os.WriteFile(path, kubeconfig, 0o600)
}

// WaitAvailable waits until the HostedControlPlane key is Available and,
// when its Cluster's infrastructure is a LocalCluster (which the local
// cluster provisions; no other infrastructure kind is provisioned here), the
// Cluster is Available too, as Cluster API and clusterctl describe report
// it; it reports the conditions of the one that is not in time.
func WaitAvailable(ctx context.Context, c client.Client, key client.ObjectKey, timeout time.Duration) error {
	return cluster.Poll(ctx, timeout, 2*time.Second, func(ctx context.Context) error {
		hcp := &v1alpha1.HostedControlPlane{}
		if err := c.Get(ctx, key, hcp); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(hcp.Status.Conditions, v1alpha1.AvailableCondition) {
			return fmt.Errorf("HostedControlPlane %s is not Available:%s", key, FormatConditions(hcp.Status.Conditions))
		}
		cl := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: hcp.Labels[clusterv1.ClusterNameLabel]}, cl); err != nil {
			return err
		}
		infra := cl.Spec.InfrastructureRef
		local := infra.APIGroup == cluster.LocalClusterKind.Group && infra.Kind == cluster.LocalClusterKind.Kind
		if local && !apimeta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1.AvailableCondition) {
			return fmt.Errorf("the Cluster %s/%s is not Available:%s", cl.Namespace, cl.Name, FormatConditions(cl.Status.Conditions))
		}
		return nil
	}, nil)
}

// FormatConditions lists conditions one per line, as a reader of errors and
// test logs wants them.
func FormatConditions(conds []metav1.Condition) string {
	out := ""
	for _, c := range conds {
		out += fmt.Sprintf("\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return out
}

// Kubeconfig is the admin kubeconfig the provider wrote for the Cluster
// key, as Cluster API and users read it.
func Kubeconfig(ctx context.Context, c client.Client, cluster client.ObjectKey) ([]byte, error) {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Name + "-kubeconfig"}, secret); err != nil {
		return nil, err
	}
	return secret.Data["value"], nil
}
