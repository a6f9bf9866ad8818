package components

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types/upstream"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
)

// Names kubeadm gives what `kubeadm join` reads; the controller keeps the
// same objects kubeadm init would create, under the same names.
const (
	KubeadmConfigName   = "kubeadm-config"
	KubeletConfigName   = "kubelet-config"
	clusterInfoReader   = "kubeadm:bootstrap-signer-clusterinfo"
	kubeadmConfigReader = "kubeadm:nodes-kubeadm-config"
	kubeletConfigReader = "kubeadm:kubelet-config"
	getNodes            = "kubeadm:get-nodes"
	issuerDiscovery     = "hosted-control-plane:service-account-issuer-discovery"
)

// Join is what kubeadm workers need to join the workload cluster, as
// `kubeadm init` would have created it:
//
//   - kube-public/cluster-info with the endpoint and the cluster CA, readable
//     anonymously; the hosted controller manager's bootstrap signer adds a
//     signature per bootstrap token, which `kubeadm join` checks;
//   - RBAC that lets bootstrap tokens post CSRs, has the CSR approver approve
//     them and the renewals of node certificates, and lets joining nodes read
//     Nodes, kubeadm-config and kubelet-config;
//   - kube-system/kubeadm-config (the ClusterConfiguration in the kubeadm API
//     version of the Kubernetes minor) and kube-system/kubelet-config;
//   - the API server's access to the kubelet API (logs, exec);
//   - with spec.serviceAccountIssuer, anonymous reading of the service
//     account issuer's discovery document and keys (Kubernetes' role
//     system:service-account-issuer-discovery bound to
//     system:unauthenticated), so that a cloud's identity federation can
//     fetch them; nothing else becomes anonymous.
//
// cluster-info carries the cluster CA the controller observed
// (Input.ClusterCA), the one the kubeadm bootstrap provider pins in its
// discovery hashes.
type Join struct{}

// Name names its golden file.
func (Join) Name() string { return "join" }

// Condition reports it.
func (Join) Condition() string { return v1alpha1.NodeJoinReadyCondition }

// Ready: objects in place are ready.
func (Join) Ready(_ context.Context, _ client.Reader, in render.Input, applied readiness.Applied) (readiness.Outcome, error) {
	return readiness.Ready(fmt.Sprintf("%d objects of Kubernetes %s in place", len(applied.Objects), in.AddonsVersion())), nil
}

// Render renders the objects.
func (Join) Render(in render.Input) ([]client.Object, error) {
	clusterInfo, err := clusterInfo(in)
	if err != nil {
		return nil, err
	}
	kubeadmConfig, err := kubeadmConfig(in)
	if err != nil {
		return nil, err
	}
	kubeletConfig, err := kubeletConfig(in)
	if err != nil {
		return nil, err
	}
	bootstrappers := groups(bootstrapTokenGroup)
	objs := []client.Object{clusterInfo}
	objs = append(objs, configMapReader(metav1.NamespacePublic, clusterInfoReader, bootstrapapi.ConfigMapClusterInfo,
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:anonymous"})...)
	objs = append(objs,
		clusterRoleBinding("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", bootstrappers...),
		clusterRoleBinding("kubeadm:node-autoapprove-bootstrap",
			"system:certificates.k8s.io:certificatesigningrequests:nodeclient", bootstrappers...),
		clusterRoleBinding("kubeadm:node-autoapprove-certificate-rotation",
			"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", groups(nodesGroup)...),
		clusterRole(getNodes, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}),
		clusterRoleBinding(getNodes, getNodes, bootstrappers...),
		clusterRoleBinding("kubeadm:apiserver-kubelet-client", "system:kubelet-api-admin",
			rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeletClientUser}),
		kubeadmConfig,
	)
	objs = append(objs, configMapReader(metav1.NamespaceSystem, kubeadmConfigReader, KubeadmConfigName, groups(bootstrapTokenGroup, nodesGroup)...)...)
	objs = append(objs, kubeletConfig)
	objs = append(objs, configMapReader(metav1.NamespaceSystem, kubeletConfigReader, KubeletConfigName, groups(nodesGroup, bootstrapTokenGroup)...)...)
	if in.ControlPlane.Spec.ServiceAccountIssuer != "" {
		objs = append(objs, clusterRoleBinding(issuerDiscovery, "system:service-account-issuer-discovery", groups(user.AllUnauthenticated)...))
	}
	return objs, nil
}

// clusterInfo is kubeadm's cluster-info ConfigMap: a kubeconfig with one
// unnamed cluster and no user.
func clusterInfo(in render.Input) (client.Object, error) {
	if len(in.ClusterCA) == 0 {
		return nil, fmt.Errorf("no cluster CA certificate for %s yet", bootstrapapi.ConfigMapClusterInfo)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[""] = &clientcmdapi.Cluster{Server: apiServerURL(in), CertificateAuthorityData: clusterTrust(in, in.ClusterCA)}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", bootstrapapi.ConfigMapClusterInfo, err)
	}
	return configMap(metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, map[string]string{bootstrapapi.KubeConfigKey: string(data)}), nil
}

// kubeadmConfig is the ClusterConfiguration `kubeadm join` reads, marshalled
// as Cluster API's kubeadm control plane marshals it for the version.
func kubeadmConfig(in render.Input) (client.Object, error) {
	cfg := &bootstrapv1.ClusterConfiguration{
		ControlPlaneEndpoint: fmt.Sprintf("%s:%d", in.Endpoint.Host, in.Endpoint.Port),
		ImageRepository:      in.Settings.Registry,
	}
	data := &upstream.AdditionalData{
		KubernetesVersion: ptr.To(in.AddonsVersion()),
		ClusterName:       ptr.To(in.ClusterName()),
		DNSDomain:         ptr.To(in.ClusterDomain()),
		ServiceSubnet:     ptr.To(in.ServiceCIDR()),
	}
	if cidr := in.PodCIDR(); cidr != "" {
		data.PodSubnet = ptr.To(cidr)
	}
	text, err := kubeadmtypes.MarshalClusterConfigurationForVersion(cfg, in.AddonsSemver(), data)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", KubeadmConfigName, err)
	}
	return configMap("kube-system", KubeadmConfigName, map[string]string{"ClusterConfiguration": text}), nil
}

// kubeletConfig is the KubeletConfiguration every joining kubelet starts
// from, with kubeadm's defaults: certificates rotate, the API server
// authenticates with a client certificate of the cluster CA (which `kubeadm
// join` writes to /etc/kubernetes/pki/ca.crt) and is authorized by webhook.
func kubeletConfig(in render.Input) (client.Object, error) {
	cfg := kubeletv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: kubeletv1beta1.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"},
		Authentication: kubeletv1beta1.KubeletAuthentication{
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: "/etc/kubernetes/pki/ca.crt"},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization:      kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},
		CgroupDriver:       "systemd",
		ClusterDNS:         []string{in.DNSIP()},
		ClusterDomain:      in.ClusterDomain(),
		HealthzBindAddress: "127.0.0.1",
		HealthzPort:        ptr.To[int32](10248),
		RotateCertificates: true,
		StaticPodPath:      "/etc/kubernetes/manifests",
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", KubeletConfigName, err)
	}
	return configMap("kube-system", KubeletConfigName, map[string]string{"kubelet": string(data)}), nil
}
