package components

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// kubeconfigCertDir is where a pod mounts the client certificate its
// kubeconfig refers to; client-go reloads the files when they are renewed.
const kubeconfigCertDir = "/etc/kubernetes/kubeconfig-pki"

// Users of component kubeconfigs.
const (
	controllerManagerUser = "controller-manager"
	schedulerUser         = "scheduler"
	konnectivityUser      = "konnectivity"
)

// KubeconfigName is the Secret with the kubeconfig of a component.
func (in *Input) KubeconfigName(user string) string { return in.name(user + "-kubeconfig") }

// Configs renders the configuration Secrets the pods mount: the kubeconfigs
// of the components that talk to the API server and the API server's egress
// selector. The kubeconfigs refer to the mounted certificate files rather
// than embedding them, so they never change when certificates are renewed.
func Configs(in *Input) ([]client.Object, error) {
	inCluster := fmt.Sprintf("https://%s.%s.svc:%d", in.APIServerServiceName(), in.Namespace(), in.ServicePort())
	objs := []client.Object{in.egressSelector()}
	for user, server := range map[string]string{
		controllerManagerUser: inCluster,
		schedulerUser:         inCluster,
		// The konnectivity server runs in the API server's pod.
		konnectivityUser: fmt.Sprintf("https://localhost:%d", contract.APIServerPort),
	} {
		data, err := encodeKubeconfig(in.ClusterName(),
			&clientcmdapi.Cluster{Server: server, CertificateAuthority: kubeconfigCertDir + "/ca.crt"},
			user, &clientcmdapi.AuthInfo{ClientCertificate: kubeconfigCertDir + "/tls.crt", ClientKey: kubeconfigCertDir + "/tls.key"})
		if err != nil {
			return nil, err
		}
		objs = append(objs, &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: in.meta(in.KubeconfigName(user), ""),
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{"kubeconfig": data},
		})
	}
	slices.SortFunc(objs, func(a, b client.Object) int { return strings.Compare(a.GetName(), b.GetName()) })
	return objs, nil
}

func encodeKubeconfig(clusterName string, cluster *clientcmdapi.Cluster, user string, auth *clientcmdapi.AuthInfo) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = cluster
	cfg.AuthInfos[user] = auth
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: user}
	cfg.CurrentContext = user
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encode kubeconfig of %s: %w", user, err)
	}
	return data, nil
}

// ClusterKubeconfig renders <cluster>-kubeconfig, the admin kubeconfig
// Cluster API and users reach the workload cluster with, from the admin
// client certificate Secret (tls.crt, tls.key, ca.crt).
func ClusterKubeconfig(in *Input, admin *corev1.Secret) (*corev1.Secret, error) {
	for _, key := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if len(admin.Data[key]) == 0 {
			return nil, fmt.Errorf("secret %s has no %s yet", admin.Name, key)
		}
	}
	data, err := encodeKubeconfig(in.ClusterName(), &clientcmdapi.Cluster{
		Server:                   fmt.Sprintf("https://%s:%d", in.Endpoint.Host, in.Endpoint.Port),
		CertificateAuthorityData: admin.Data["ca.crt"],
	}, in.ClusterName()+"-admin", &clientcmdapi.AuthInfo{ClientCertificateData: admin.Data["tls.crt"], ClientKeyData: admin.Data["tls.key"]})
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: in.meta(contract.ClusterKubeconfigName(in.ClusterName()), ""),
		Type:       clusterv1.ClusterSecretType,
		Data:       map[string][]byte{"value": data},
	}, nil
}
