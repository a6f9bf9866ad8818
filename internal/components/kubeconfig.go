package components

import (
	"context"
	"fmt"
	"slices"
	"strings"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
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

// kubeconfigName is the Secret with the kubeconfig of a component.
func kubeconfigName(in render.Input, user string) string { return in.Name(user + "-kubeconfig") }

// Configs are the configuration Secrets the pods mount: the kubeconfigs of
// the components that talk to the API server and the API server's egress
// selector. The kubeconfigs refer to the mounted certificate files rather
// than embedding them, so they never change when certificates are renewed.
type Configs struct{}

// Name names its golden file.
func (Configs) Name() string { return "configs" }

// Condition reports it, with the cluster kubeconfig.
func (Configs) Condition() string { return v1alpha1.KubeconfigReadyCondition }

// Render renders the Secrets, sorted by name.
func (Configs) Render(in render.Input) ([]client.Object, error) {
	inCluster := fmt.Sprintf("https://%s.%s.svc:%d", contract.APIServerServiceName(in.ClusterName()), in.Namespace(), servicePort(in))
	objs := []client.Object{egressSelector(in)}
	for _, bundle := range trustBundles(in) {
		objs = append(objs, bundle)
	}
	for _, file := range []func(render.Input) (*corev1.Secret, error){authenticationConfig, auditPolicy} {
		secret, err := file(in)
		if err != nil {
			return nil, err
		}
		if secret != nil {
			objs = append(objs, secret)
		}
	}
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
			ObjectMeta: in.Meta(kubeconfigName(in, user), ""),
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{"kubeconfig": data},
		})
	}
	slices.SortFunc(objs, func(a, b client.Object) int { return strings.Compare(a.GetName(), b.GetName()) })
	return objs, nil
}

// Prunes: the API server's authentication configuration and audit policy
// go when the spec no longer sets them.
func (Configs) Prunes() (string, []client.ObjectList) {
	return contract.APIServerComponent, []client.ObjectList{&corev1.SecretList{}}
}

// Ready: a Secret in place is ready.
func (Configs) Ready(context.Context, client.Reader, render.Input, readiness.Applied) (readiness.Outcome, error) {
	return readiness.Ready(""), nil
}

// RenderedSecretDigests are the digests of the Secrets the controller writes
// itself, from their rendering, by name.
func RenderedSecretDigests(in render.Input) (map[string]string, error) {
	objs, err := Configs{}.Render(in)
	if err != nil {
		return nil, err
	}
	digests := map[string]string{}
	for _, obj := range objs {
		if secret, ok := obj.(*corev1.Secret); ok {
			digests[secret.Name] = contract.DataDigest(secret.Data)
		}
	}
	return digests, nil
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

// ClusterKubeconfig is <cluster>-kubeconfig, the admin kubeconfig Cluster
// API and users reach the workload cluster with. It embeds the admin client
// certificate the controller observed (Input.Admin).
type ClusterKubeconfig struct{}

// Name names its golden file.
func (ClusterKubeconfig) Name() string { return "cluster-kubeconfig" }

// Condition reports it, with the configs.
func (ClusterKubeconfig) Condition() string { return v1alpha1.KubeconfigReadyCondition }

// AdminSecret is the Secret of the admin client certificate.
func AdminSecret(in render.Input) string { return in.Name("admin") }

// Certificates are the admin client certificate's.
func (ClusterKubeconfig) Certificates(in render.Input) []*cmv1.Certificate {
	admin := in.ClientCertificate(AdminSecret(in), in.ClusterAuthority().Issuer(), "kubernetes-admin", "system:masters")
	// Short-lived (spec.certificates.kubeconfigCertificateDuration): the
	// admin kubeconfig leaves the management cluster.
	admin.Spec.Duration = &metav1.Duration{Duration: in.Lifetimes().Kubeconfig}
	return []*cmv1.Certificate{admin}
}

// Render renders the kubeconfig Secret, once the admin certificate is issued.
func (ClusterKubeconfig) Render(in render.Input) ([]client.Object, error) {
	if key := in.Admin.Missing(); key != "" {
		return nil, fmt.Errorf("secret %s has no %s yet", AdminSecret(in), key)
	}
	data, err := encodeKubeconfig(in.ClusterName(), &clientcmdapi.Cluster{
		Server:                   apiServerURL(in),
		CertificateAuthorityData: clusterTrust(in, in.Admin.CA),
	}, in.ClusterName()+"-admin", &clientcmdapi.AuthInfo{ClientCertificateData: in.Admin.Cert, ClientKeyData: in.Admin.Key})
	if err != nil {
		return nil, err
	}
	return []client.Object{&corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: in.Meta(contract.ClusterKubeconfigName(in.ClusterName()), ""),
		Type:       clusterv1.ClusterSecretType,
		Data:       map[string][]byte{"value": data},
	}}, nil
}

// Ready: the Secret in place is ready.
func (ClusterKubeconfig) Ready(_ context.Context, _ client.Reader, in render.Input, _ readiness.Applied) (readiness.Outcome, error) {
	return readiness.Ready("Secret " + contract.ClusterKubeconfigName(in.ClusterName()) + " holds the admin kubeconfig"), nil
}
