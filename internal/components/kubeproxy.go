package components

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// KubeProxyName is the kube-proxy DaemonSet, ConfigMap, ServiceAccount and
// Role in kube-system, as kubeadm names them.
const KubeProxyName = "kube-proxy"

// serviceAccountDir is where a pod finds its service account's token and
// the cluster CA.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// KubeProxy is kube-proxy as kubeadm deploys it: a DaemonSet on every node,
// its configuration and kubeconfig in a ConfigMap (which joining nodes may
// read), and its RBAC.
type KubeProxy struct{}

// Name names its golden file.
func (KubeProxy) Name() string { return "kube-proxy" }

// Condition reports it.
func (KubeProxy) Condition() string { return v1alpha1.KubeProxyReadyCondition }

// Disabled tells whether spec.kubeProxy turns kube-proxy off.
func (KubeProxy) Disabled(in render.Input) bool {
	return ptr.Deref(in.ControlPlane.Spec.KubeProxy.Disabled, false)
}

// Ready is rolled out on the nodes, or NoNodes before the first one joins
// (until the workload cluster's DaemonSet controller has seen kube-proxy, it
// reads as 0 of 0 nodes available).
func (KubeProxy) Ready(ctx context.Context, c client.Reader, _ render.Input, applied readiness.Applied) (readiness.Outcome, error) {
	return rolledOutOnNodes(ctx, c, applied)
}

// Render renders kube-proxy, also when it is disabled, so that the
// controller knows what to remove.
func (KubeProxy) Render(in render.Input) ([]client.Object, error) {
	config, err := kubeProxyConfig(in)
	if err != nil {
		return nil, err
	}
	objs := []client.Object{
		serviceAccount("kube-system", KubeProxyName),
		clusterRoleBinding("kubeadm:node-proxier", "system:node-proxier",
			rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: KubeProxyName, Namespace: "kube-system"}),
	}
	objs = append(objs, configMapReader("kube-system", KubeProxyName, KubeProxyName, groups(bootstrapTokenGroup)...)...)
	return append(objs, config, kubeProxyDaemonSet(in)), nil
}

// kubeProxyConfig is kube-proxy's ConfigMap: its configuration, and a
// kubeconfig that reaches the API server at the endpoint with the pod's
// service account (the kubernetes Service needs kube-proxy to work).
func kubeProxyConfig(in render.Input) (client.Object, error) {
	// A map rather than kube-proxy's own type, whose every unset field
	// would be written out as null.
	config := map[string]any{
		"apiVersion":       "kubeproxy.config.k8s.io/v1alpha1",
		"kind":             "KubeProxyConfiguration",
		"bindAddress":      "0.0.0.0",
		"clientConnection": map[string]any{"kubeconfig": "/var/lib/kube-proxy/kubeconfig.conf"},
	}
	if cidr := in.PodCIDR(); cidr != "" {
		config["clusterCIDR"] = cidr
	}
	data, err := yaml.Marshal(config)
	if err != nil {
		return nil, fmt.Errorf("render kube-proxy configuration: %w", err)
	}
	kubeconfig, err := encodeKubeconfig("default",
		&clientcmdapi.Cluster{Server: apiServerURL(in), CertificateAuthority: serviceAccountDir + "/ca.crt"},
		"default", &clientcmdapi.AuthInfo{TokenFile: serviceAccountDir + "/token"})
	if err != nil {
		return nil, err
	}
	return configMap("kube-system", KubeProxyName, map[string]string{"config.conf": string(data), "kubeconfig.conf": string(kubeconfig)}), nil
}

func kubeProxyDaemonSet(in render.Input) *appsv1.DaemonSet {
	spec := in.ControlPlane.Spec.KubeProxy
	selector := map[string]string{k8sAppLabel: KubeProxyName}
	c := render.Container(KubeProxyName, render.Image(in.DefaultImage(contract.KubeProxyRepository, in.AddonsVersion()), spec.Image), spec.Container,
		"/usr/local/bin/kube-proxy", render.Flags(map[string]string{
			"config":            "/var/lib/kube-proxy/config.conf",
			"hostname-override": "$(NODE_NAME)",
		}, spec.Args))
	// kube-proxy programs the node's packet filter.
	c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	c.Env = append(c.Env, corev1.EnvVar{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}})
	c.VolumeMounts = []corev1.VolumeMount{
		{Name: "kube-proxy", MountPath: "/var/lib/kube-proxy"},
		{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
		{Name: "lib-modules", MountPath: "/lib/modules", ReadOnly: true},
	}
	pod := corev1.PodSpec{
		HostNetwork:        true,
		ServiceAccountName: KubeProxyName,
		PriorityClassName:  priorityClass(spec.PriorityClassName, "system-node-critical"),
		NodeSelector:       map[string]string{corev1.LabelOSStable: "linux"},
		Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		Containers:         []corev1.Container{c},
		Volumes: []corev1.Volume{
			{Name: "kube-proxy", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: KubeProxyName},
			}}},
			{Name: "xtables-lock", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: "/run/xtables.lock", Type: ptr.To(corev1.HostPathFileOrCreate),
			}}},
			{Name: "lib-modules", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/lib/modules"}}},
		},
	}
	return addonDaemonSet(KubeProxyName, selector, pod)
}
