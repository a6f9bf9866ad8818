package components

import (
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

const (
	konnectivitySocketDir = "/run/konnectivity"
	konnectivitySocket    = konnectivitySocketDir + "/konnectivity-server.socket"
	konnectivityHealth    = 8134
	konnectivityAdmin     = 8133
	// KonnectivityAudience is the audience of the agents' service account
	// tokens, which the konnectivity server reviews.
	KonnectivityAudience = "system:konnectivity-server"
)

// APIServerReplicas is the number of API server pods.
func (in *Input) APIServerReplicas() int32 { return ptr.Deref(in.ControlPlane.Spec.Replicas, 2) }

// APIServerName is the API server Deployment.
func (in *Input) APIServerName() string { return in.name("apiserver") }

// EgressSelectorName is the Secret with the API server's egress selector
// configuration, which sends traffic to nodes through konnectivity.
func (in *Input) EgressSelectorName() string { return in.name("egress-selector") }

// KonnectivityServerCountName is the ConfigMap that tells each konnectivity
// server how many API servers run.
func (in *Input) KonnectivityServerCountName() string { return in.name("konnectivity-server-count") }

// APIServer renders the kube-apiserver Deployment, with the konnectivity
// server beside each API server, its network policy and, with more than one
// API server, a PodDisruptionBudget. Its configuration Secrets come from
// Configs.
func APIServer(in *Input) []client.Object {
	objs := []client.Object{in.apiServerNetworkPolicy(), in.konnectivityServerCount(), in.apiServerDeployment()}
	if in.APIServerReplicas() > 1 {
		objs = append(objs, in.apiServerPDB())
	}
	return objs
}

// apiServerPDB lets a node drain take one API server at a time, so the
// others keep serving. A single API server gets none: it would only ever
// allow its one pod to go. An API server that is not ready serves nobody,
// so it may always be evicted; otherwise it would hold up every drain.
func (in *Input) apiServerPDB() *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: in.meta(in.APIServerName(), contract.APIServerComponent),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             ptr.To(intstr.FromInt32(1)),
			Selector:                   &metav1.LabelSelector{MatchLabels: in.Selector(contract.APIServerComponent)},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}

// konnectivityServerCount holds the number of API servers outside the pod
// template, so that scaling the API servers only adds or removes pods instead
// of rolling every one: a new konnectivity server reads the count when it
// starts, and agents follow the count the servers they reach report.
func (in *Input) konnectivityServerCount() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: in.meta(in.KonnectivityServerCountName(), contract.APIServerComponent),
		Data:       map[string]string{konnectivityServerCountKey: strconv.Itoa(int(in.APIServerReplicas()))},
	}
}

const (
	konnectivityServerCountKey = "server-count"
	konnectivityServerCountEnv = "SERVER_COUNT"
	// apiServerShutdownDelay keeps a terminating API server serving while
	// its endpoint leaves the Service and load balancers stop sending it new
	// connections; the pod's grace period covers it and the drain after it.
	apiServerShutdownDelay = 15 * time.Second
	apiServerGracePeriod   = 60
)

func (in *Input) egressSelector() *corev1.Secret {
	config := `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: GRPC
    transport:
      uds:
        udsName: ` + konnectivitySocket + "\n"
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: in.meta(in.EgressSelectorName(), contract.APIServerComponent),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"egress-selector.yaml": []byte(config)},
	}
}

func (in *Input) apiServerArgs() []string {
	pki := "/etc/kubernetes/pki"
	defaults := map[string]string{
		"advertise-address":                  "$(POD_IP)",
		"allow-privileged":                   "true",
		"authorization-mode":                 "Node,RBAC",
		"client-ca-file":                     pki + "/apiserver/ca.crt",
		"enable-admission-plugins":           "NodeRestriction",
		"enable-bootstrap-token-auth":        "true",
		"endpoint-reconciler-type":           "none",
		"egress-selector-config-file":        "/etc/kubernetes/egress/egress-selector.yaml",
		"etcd-servers":                       fmt.Sprintf("https://%s:%d", contract.EtcdServerName(in.ClusterName(), in.Namespace()), contract.EtcdClientPort),
		"etcd-cafile":                        pki + "/etcd/ca.crt",
		"etcd-certfile":                      pki + "/etcd/tls.crt",
		"etcd-keyfile":                       pki + "/etcd/tls.key",
		"kubelet-client-certificate":         pki + "/kubelet/tls.crt",
		"kubelet-client-key":                 pki + "/kubelet/tls.key",
		"kubelet-preferred-address-types":    "InternalIP,ExternalIP,Hostname",
		"profiling":                          "false",
		"proxy-client-cert-file":             pki + "/front-proxy/tls.crt",
		"proxy-client-key-file":              pki + "/front-proxy/tls.key",
		"requestheader-allowed-names":        "front-proxy-client",
		"requestheader-client-ca-file":       pki + "/front-proxy/ca.crt",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
		"requestheader-group-headers":        "X-Remote-Group",
		"requestheader-username-headers":     "X-Remote-User",
		"secure-port":                        strconv.Itoa(contract.APIServerPort),
		"shutdown-delay-duration":            apiServerShutdownDelay.String(),
		"service-account-issuer":             "https://kubernetes.default.svc." + in.ClusterDomain(),
		"service-account-key-file":           pki + "/sa/tls.key",
		"service-account-signing-key-file":   pki + "/sa/tls.key",
		"service-cluster-ip-range":           in.ServiceCIDR(),
		"tls-cert-file":                      pki + "/apiserver/tls.crt",
		"tls-private-key-file":               pki + "/apiserver/tls.key",
	}
	return flags(defaults, in.ControlPlane.Spec.Deployment.APIServer.Args)
}

func (in *Input) konnectivityArgs() []string {
	pki := "/etc/konnectivity/pki"
	return flags(map[string]string{
		"uds-name":                 konnectivitySocket,
		"delete-existing-uds-file": "true",
		"server-port":              "0",
		"agent-port":               strconv.Itoa(contract.KonnectivityPort),
		"admin-port":               strconv.Itoa(konnectivityAdmin),
		"health-port":              strconv.Itoa(konnectivityHealth),
		"cluster-cert":             pki + "/tls.crt",
		"cluster-key":              pki + "/tls.key",
		"mode":                     "grpc",
		"kubeconfig":               "/etc/konnectivity/kubeconfig/kubeconfig",
		"authentication-audience":  KonnectivityAudience,
		"agent-namespace":          "kube-system",
		"agent-service-account":    "konnectivity-agent",
		"server-count":             "$(" + konnectivityServerCountEnv + ")",
		"proxy-strategies":         "destHost,default",
	}, in.ControlPlane.Spec.Deployment.APIServer.Konnectivity.Args)
}

func (in *Input) apiServerDeployment() *appsv1.Deployment {
	spec := in.ControlPlane.Spec.Deployment.APIServer
	pod := corev1.PodSpec{Affinity: spreadAcrossNodes(in.Selector(contract.APIServerComponent))}

	api := container("kube-apiserver", image(in.defaultImage("kube-apiserver", in.ControlPlane.Spec.Version), spec.Image),
		spec.Container, "kube-apiserver", in.apiServerArgs())
	api.Env = []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
	api.Ports = []corev1.ContainerPort{{Name: "https", ContainerPort: contract.APIServerPort}}
	api.ReadinessProbe = probe("/readyz", contract.APIServerPort, corev1.URISchemeHTTPS, 3)
	api.LivenessProbe = probe("/livez", contract.APIServerPort, corev1.URISchemeHTTPS, 8)
	api.StartupProbe = probe("/livez", contract.APIServerPort, corev1.URISchemeHTTPS, 30)
	mountSecrets(&pod, &api,
		secretVolume{"apiserver", in.APIServerCertSecret(), "/etc/kubernetes/pki/apiserver"},
		secretVolume{"etcd", in.APIServerEtcdSecret(), "/etc/kubernetes/pki/etcd"},
		secretVolume{"kubelet", in.KubeletClientSecret(), "/etc/kubernetes/pki/kubelet"},
		secretVolume{"front-proxy", in.FrontProxyClientSecret(), "/etc/kubernetes/pki/front-proxy"},
		secretVolume{"sa", in.SASecret(), "/etc/kubernetes/pki/sa"},
		secretVolume{"egress", in.EgressSelectorName(), "/etc/kubernetes/egress"})

	konn := container("konnectivity-server",
		image(in.defaultImage("kas-network-proxy/proxy-server", KonnectivityTag(in.version)), spec.Konnectivity.Image),
		spec.Konnectivity, "/proxy-server", in.konnectivityArgs())
	konn.Ports = []corev1.ContainerPort{{Name: "konnectivity", ContainerPort: contract.KonnectivityPort}}
	konn.Env = []corev1.EnvVar{{Name: konnectivityServerCountEnv, ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: in.KonnectivityServerCountName()},
			Key:                  konnectivityServerCountKey,
		},
	}}}
	konn.LivenessProbe = probe("/healthz", konnectivityHealth, corev1.URISchemeHTTP, 8)
	mountSecrets(&pod, &konn,
		secretVolume{"konnectivity-server", in.KonnectivityServerSecret(), "/etc/konnectivity/pki"},
		secretVolume{"konnectivity-kubeconfig", in.KubeconfigName(konnectivityUser), "/etc/konnectivity/kubeconfig"},
		secretVolume{"konnectivity-client", in.KonnectivityClientCertSecret(), kubeconfigCertDir})

	socket := corev1.VolumeMount{Name: "konnectivity-uds", MountPath: konnectivitySocketDir}
	api.VolumeMounts = append(api.VolumeMounts, socket)
	konn.VolumeMounts = append(konn.VolumeMounts, socket)
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "konnectivity-uds", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	pod.Containers = []corev1.Container{api, konn}
	if in.Listener != nil {
		pod.Containers = append(pod.Containers, in.tunnelServer(&pod))
	}
	pod = hardenedPod(pod, spec.PriorityClassName)
	pod.TerminationGracePeriodSeconds = ptr.To[int64](apiServerGracePeriod)

	return in.deployment(in.APIServerName(), contract.APIServerComponent, in.APIServerReplicas(), in.podLabels(contract.APIServerComponent), pod)
}

// tunnelServer is the sidecar that ends the outer TLS of the kubernetes
// Service's tunnel (see KubernetesService) and hands the bytes inside, the
// pod's own TLS, to the API server beside it.
func (in *Input) tunnelServer(pod *corev1.PodSpec) corev1.Container {
	const pki = "/etc/tunnel/pki"
	c := container("tunnel", in.Settings.TunnelImage, v1alpha1.Container{}, "/tunnel", []string{
		"server",
		"--listen=:" + strconv.Itoa(contract.TunnelPort),
		"--health-listen=:" + strconv.Itoa(contract.TunnelHealthPort),
		"--upstream=127.0.0.1:" + strconv.Itoa(contract.APIServerPort),
		"--cert-file=" + pki + "/tls.crt",
		"--key-file=" + pki + "/tls.key",
	})
	c.Ports = []corev1.ContainerPort{{Name: contract.TunnelPortName, ContainerPort: contract.TunnelPort}}
	c.ReadinessProbe = probe("/readyz", contract.TunnelHealthPort, corev1.URISchemeHTTP, 3)
	c.LivenessProbe = probe("/healthz", contract.TunnelHealthPort, corev1.URISchemeHTTP, 3)
	mountSecrets(pod, &c, secretVolume{"tunnel", in.TunnelCertSecret(), pki})
	return c
}

// podLabels are the labels of an API server pod: those of its component and
// the version it runs.
func (in *Input) podLabels(component string) map[string]string {
	labels := in.Labels(component)
	labels[contract.VersionLabel] = in.ControlPlane.Spec.Version
	return labels
}
