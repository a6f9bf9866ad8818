package components

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Objects in the workload cluster cannot carry an owner reference to a
// control plane in another cluster. They carry ManagedByLabel instead: the
// applier takes only objects with it as its own, and the controller's cache
// of the workload cluster holds only them.

// WorkloadLabels are the labels of every object the controller keeps in a
// workload cluster.
func WorkloadLabels() map[string]string {
	return map[string]string{contract.ManagedByLabel: contract.ManagedBy}
}

// k8sAppLabel names an add-on's pods, as kubeadm names them; Services and
// tools select them by it.
const k8sAppLabel = "k8s-app"

// Well-known identities of kubeadm clusters.
const (
	bootstrapTokenGroup = "system:bootstrappers:kubeadm:default-node-token"
	nodesGroup          = "system:nodes"
)

func workloadMeta(namespace, name string, extra map[string]string) metav1.ObjectMeta {
	labels := WorkloadLabels()
	for k, v := range extra {
		labels[k] = v
	}
	return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}
}

func serviceAccount(namespace, name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: workloadMeta(namespace, name, nil),
	}
}

func configMap(namespace, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: workloadMeta(namespace, name, nil),
		Data:       data,
	}
}

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: workloadMeta("", name, nil),
		Rules:      rules,
	}
}

func clusterRoleBinding(name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: workloadMeta("", name, nil),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   subjects,
	}
}

// configMapReader is a Role, and its binding to subjects, that lets them
// read one ConfigMap of the namespace.
func configMapReader(namespace, name, configMap string, subjects ...rbacv1.Subject) []client.Object {
	return []client.Object{
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
			ObjectMeta: workloadMeta(namespace, name, nil),
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{configMap}, Verbs: []string{"get"},
			}},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
			ObjectMeta: workloadMeta(namespace, name, nil),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   subjects,
		},
	}
}

func groups(names ...string) []rbacv1.Subject {
	subjects := make([]rbacv1.Subject, len(names))
	for i, n := range names {
		subjects[i] = rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: n}
	}
	return subjects
}

// rolledOut is the readiness of an add-on: every Deployment and DaemonSet it
// runs has rolled out.
func rolledOut(ctx context.Context, c client.Reader, applied readiness.Applied) (readiness.Outcome, error) {
	return readiness.RolledOut(ctx, c, applied.Objects, readiness.KindName)
}

// rolledOutOnNodes is rolledOut for an add-on whose pods run on the workload
// cluster's nodes: before the first node joins, there is nothing they can
// run on, which is how a new cluster is and not a fault, and the condition
// says so. Only the nodes' metadata is read (and cached).
func rolledOutOnNodes(ctx context.Context, c client.Reader, applied readiness.Applied) (readiness.Outcome, error) {
	out, err := rolledOut(ctx, c, applied)
	if err != nil || out.Done {
		return out, err
	}
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := c.List(ctx, nodes); err != nil {
		return readiness.Outcome{}, fmt.Errorf("list nodes: %w", err)
	}
	if len(nodes.Items) > 0 {
		return out, nil
	}
	return readiness.Outcome{
		Done: true, Reason: v1alpha1.NoNodesReason,
		Message: "applied; no node has joined the workload cluster yet, and its pods start once one does",
	}, nil
}

// addonDeployment is a Deployment of an add-on in kube-system whose pods
// carry selector as labels.
func addonDeployment(name string, selector map[string]string, replicas int32, pod corev1.PodSpec) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: workloadMeta("kube-system", name, selector),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: selector}, Spec: pod},
		},
	}
}

// addonDaemonSet is a DaemonSet of an add-on in kube-system whose pods carry
// selector as labels, rolled one node at a time.
func addonDaemonSet(name string, selector map[string]string, pod corev1.PodSpec) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: workloadMeta("kube-system", name, selector),
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: selector},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
			Template:       corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: selector}, Spec: pod},
		},
	}
}

func priorityClass(set, def string) string {
	if set != "" {
		return set
	}
	return def
}
