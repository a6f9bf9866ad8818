package components

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// APIServer is the kube-apiserver Deployment, with the konnectivity server
// beside each API server (konnectivity.go) and, in gateway mode, the server
// end of the kubernetes Service's tunnel (tunnel.go); its network policy
// and, with more than one API server, a PodDisruptionBudget. Its
// configuration Secrets are among the Configs.
type APIServer struct{}

// Name names its golden file.
func (APIServer) Name() string { return "apiserver" }

// Condition reports it.
func (APIServer) Condition() string { return v1alpha1.APIServerReadyCondition }

// APIServerReplicas is the number of API server pods.
func APIServerReplicas(cp *v1alpha1.HostedControlPlane) int32 { return ptr.Deref(cp.Spec.Replicas, 2) }

// APIServerName is the API server Deployment.
func APIServerName(in render.Input) string { return in.Name("apiserver") }

// Render renders the API servers.
func (APIServer) Render(in render.Input) ([]client.Object, error) {
	deployment, err := apiServerDeployment(in)
	if err != nil {
		return nil, err
	}
	objs := append(apiServerNetworkPolicies(in), konnectivityServer{}.count(in), deployment)
	if APIServerReplicas(in.ControlPlane) > 1 {
		objs = append(objs, apiServerDisruptionBudget(in))
	}
	return objs, nil
}

// Prunes: down to one API server, its disruption budget goes.
func (APIServer) Prunes() (string, []client.ObjectList) {
	return contract.APIServerComponent, []client.ObjectList{&policyv1.PodDisruptionBudgetList{}}
}

// Ready is done when the Deployment has rolled out.
func (APIServer) Ready(ctx context.Context, c client.Reader, _ render.Input, applied readiness.Applied) (readiness.Outcome, error) {
	if applied.Wrote {
		return readiness.RollingOut("the API servers"), nil
	}
	return readiness.RolledOut(ctx, c, applied.Objects, client.Object.GetName)
}

// Secrets of the API server's own certificates.
func apiServerCertSecret(in render.Input) string    { return in.Name("apiserver") }
func kubeletClientSecret(in render.Input) string    { return in.Name("apiserver-kubelet-client") }
func apiServerEtcdSecret(in render.Input) string    { return in.Name("apiserver-etcd-client") }
func frontProxyClientSecret(in render.Input) string { return in.Name("front-proxy-client") }

// kubeletClientUser is the common name of the API server's client
// certificate towards kubelets, whom Join lets it in.
const kubeletClientUser = "kube-apiserver-kubelet-client"

// Certificates are the API server's serving certificate and its client
// certificates towards kubelets, etcd and extension API servers.
func (APIServer) Certificates(in render.Input) []*cmv1.Certificate {
	return []*cmv1.Certificate{
		in.ServerCertificate(apiServerCertSecret(in), in.ClusterAuthority().ServingIssuer(), "kube-apiserver", apiServerSANs(in)),
		in.ClientCertificate(kubeletClientSecret(in), in.ClusterAuthority().ServingIssuer(), kubeletClientUser, "kubeadm:cluster-admins"),
		in.ClientCertificate(apiServerEtcdSecret(in), in.EtcdCA().Issuer(), "kube-apiserver-etcd-client"),
		in.ClientCertificate(frontProxyClientSecret(in), in.FrontProxyCA().Issuer(), "front-proxy-client"),
	}
}

// apiServerSANs are every name the API server is reached under: the
// endpoint, the extra certSANs, its Services in both clusters, and loopback.
func apiServerSANs(in render.Input) []string {
	svc, ns := contract.APIServerServiceName(in.ClusterName()), in.Namespace()
	sans := []string{
		in.Endpoint.Host, "localhost", "127.0.0.1",
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + in.ClusterDomain(),
		svc, svc + "." + ns, svc + "." + ns + ".svc",
	}
	if ip := in.KubernetesServiceIP(); ip != nil {
		sans = append(sans, ip.String())
	}
	if _, _, tunnelled := tunnelUpstream(in); tunnelled {
		// The kubernetes Service's endpoint on every node (see KubernetesService).
		sans = append(sans, contract.NodeLocalAddress)
	}
	return append(sans, in.ControlPlane.Spec.APIServer.CertSANs...)
}

// apiServerDisruptionBudget lets a node drain take one API server at a
// time, so the others keep serving. A single API server gets none: it would
// only ever allow its one pod to go. An API server that is not ready serves
// nobody, so it may always be evicted; otherwise it would hold up every
// drain.
func apiServerDisruptionBudget(in render.Input) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: in.Meta(APIServerName(in), contract.APIServerComponent),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             ptr.To(intstr.FromInt32(1)),
			Selector:                   &metav1.LabelSelector{MatchLabels: in.Selector(contract.APIServerComponent)},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}

// outsidePorts are the TCP ports of the servers outside the management
// cluster the API servers reach: the OIDC providers' issuers and the audit
// webhook target, once each, in order.
func outsidePorts(in render.Input) []networkingv1.NetworkPolicyPort {
	var servers []string
	for issuer := range in.ControlPlane.Spec.OIDCProviders {
		servers = append(servers, issuer)
	}
	if audit := in.ControlPlane.Spec.Deployment.APIServer.Audit; audit != nil && audit.Webhook != nil {
		for _, target := range audit.Webhook.Targets {
			servers = append(servers, target.Server)
		}
	}
	var numbers []int32
	for _, server := range servers {
		u, err := url.Parse(server)
		if err != nil {
			continue // refused by admission
		}
		port := int32(443)
		if p, err := strconv.ParseInt(u.Port(), 10, 32); err == nil {
			port = int32(p)
		}
		if !slices.Contains(numbers, port) {
			numbers = append(numbers, port)
		}
	}
	slices.Sort(numbers)
	ports := make([]networkingv1.NetworkPolicyPort, len(numbers))
	for i, p := range numbers {
		ports[i] = render.TCPPort(p)
	}
	return ports
}

// apiServerNetworkPolicies: the API servers answer everyone on their two
// ports (three with gateway mode's tunnel): clients, the Gateway and
// konnectivity agents come from anywhere. They reach only their etcd and
// DNS, which resolves its Service, and, with spec.oidcProviders or an audit
// webhook, the ports of the issuers and of the webhook target outside the
// management cluster's API server and metadata addresses. Everything
// else they send goes out through konnectivity, whose agents dial in (kubelets, webhooks and
// aggregated API servers of the workload cluster, by the egress selector);
// the konnectivity server and the tunnel reach the API server beside them on
// loopback, which no policy filters. So they never reach the management
// API server, a metadata address or another tenant.
func apiServerNetworkPolicies(in render.Input) []client.Object {
	ports := []networkingv1.NetworkPolicyPort{render.TCPPort(contract.APIServerPort), render.TCPPort(contract.KonnectivityPort)}
	if in.Listener != nil {
		ports = append(ports, render.TCPPort(contract.TunnelPort))
	}
	egress := []networkingv1.NetworkPolicyEgressRule{
		{To: []networkingv1.NetworkPolicyPeer{in.PodsOf(contract.EtcdComponent)}, Ports: []networkingv1.NetworkPolicyPort{render.TCPPort(contract.EtcdClientPort)}},
		render.DNS(),
	}
	if ports := outsidePorts(in); len(ports) > 0 {
		// The OIDC providers' discovery documents and keys, and the audit
		// webhook, outside the management cluster's API server and
		// metadata addresses.
		egress = append(egress, in.Outside(ports...))
	}
	return in.NetworkPolicies(contract.APIServerComponent, render.Traffic{
		Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: ports}},
		Egress:  egress,
	})
}

const (
	// apiServerShutdownDelay keeps a terminating API server serving while
	// its endpoint leaves the Service and load balancers stop sending it new
	// connections. After it the API server answers new requests with 429
	// and Retry-After, which clients retry on another connection, drains
	// the requests in flight and then closes what is left, watches too,
	// within 2s (--shutdown-send-retry-after). Otherwise an open watch held
	// it for the whole request timeout (60s), past the pod's grace period.
	// The grace period covers the delay and the drain.
	apiServerShutdownDelay = 15 * time.Second
	apiServerGracePeriod   = 60
)

// egressSelectorName is the Secret with the API server's egress selector
// configuration, which sends traffic to nodes through konnectivity.
func egressSelectorName(in render.Input) string { return in.Name("egress-selector") }

func egressSelector(in render.Input) *corev1.Secret {
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
		ObjectMeta: in.Meta(egressSelectorName(in), contract.APIServerComponent),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"egress-selector.yaml": []byte(config)},
	}
}

// encryptionConfigDir is where the API servers read the
// EncryptionConfiguration with which they encrypt the workload cluster's
// Secrets (internal/encryption), from the Secret the controller generates
// once. It is read at start only: the Secret is among those the pod
// template digests, so a new list of keys rolls the API servers, and the
// rollout tells when every one of them has it (which the rewrite of the
// stored Secrets, and a rotation of keys, wait for). Automatic reload would
// leave each API server to find the change on its own, with no way to know
// when all have.
const encryptionConfigDir = contract.APIServerEncryptionDir

// apiServerArgs are the API server's arguments, and the volumes of the
// service account keys and the trust bundles they name.
func apiServerArgs(in render.Input) ([]string, []render.SecretVolume) {
	pki := contract.APIServerPKIDir
	defaults := map[string]string{
		"advertise-address":                  "$(POD_IP)",
		"allow-privileged":                   "true",
		"authorization-mode":                 "Node,RBAC",
		"client-ca-file":                     pki + "/apiserver/ca.crt",
		"enable-admission-plugins":           "NodeRestriction",
		"enable-bootstrap-token-auth":        "true",
		"endpoint-reconciler-type":           "none",
		"egress-selector-config-file":        contract.APIServerEgressDir + "/egress-selector.yaml",
		"encryption-provider-config":         encryptionConfigDir + "/" + contract.EncryptionConfigKey,
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
		"shutdown-send-retry-after":          "true",
		"service-account-issuer":             inClusterIssuer(in),
		// Without it the discovery document names the keys at the API
		// server's pod address, which pods of the workload cluster can
		// neither reach nor trust (the conformance suite's issuer discovery
		// test fetched them there); the issuer's own address they can.
		"service-account-jwks-uri": inClusterIssuer(in) + "/openid/v1/jwks",
		maxTokenLifetimeFlag:       "24h",
		"service-cluster-ip-range": in.ServiceCIDR(),
		"tls-cert-file":            pki + "/apiserver/tls.crt",
		"tls-private-key-file":     pki + "/apiserver/tls.key",
	}
	apiServerFileArgs(in, defaults)
	trust := apiServerTrustArgs(in, defaults)
	flags := render.Values(defaults)
	serviceAccountIssuerArgs(in, flags)
	keys := apiServerSAKeys(in, flags)
	return render.FlagValues(flags, in.ControlPlane.Spec.Deployment.APIServer.Args), append(keys, trust...)
}

// inClusterIssuer is the issuer of the workload cluster's service account
// tokens that its pods reach, kubernetes.default.
func inClusterIssuer(in render.Input) string {
	return "https://kubernetes.default.svc." + in.ClusterDomain()
}

// serviceAccountIssuerArgs point the API server at spec.serviceAccountIssuer:
// it signs for that issuer (the first) and accepts tokens of the in-cluster
// one it signed for before (the second), and its discovery document names
// the keys at the issuer.
func serviceAccountIssuerArgs(in render.Input, flags map[string][]string) {
	issuer := in.ControlPlane.Spec.ServiceAccountIssuer
	if issuer == "" {
		return
	}
	flags["service-account-issuer"] = append([]string{issuer}, flags["service-account-issuer"]...)
	flags["service-account-jwks-uri"] = []string{issuer + "/openid/v1/jwks"}
}

// apiServerGOGC is the API server's GOGC: its heap may grow by half its
// live size between collections, not by all of it as Go's default lets it.
// An idle API server keeps about 80 MiB live (mostly OpenAPI and its
// registries); 50 saves about 30 MiB of an idle one's memory for no CPU a
// measurement could tell, and 25 would cost much more CPU at start (README,
// "The API server's GOGC").
const apiServerGOGC = "50"

// apiServerMemory is the memory an API server asks for unless the user sets
// its resources: an idle one of a new control plane held 235 to 238 MiB
// resident (2026-11-29, README "What each container asks for").
const apiServerMemory = "256Mi"

func apiServerDeployment(in render.Input) (*appsv1.Deployment, error) {
	spec := in.ControlPlane.Spec.Deployment.APIServer
	pod := corev1.PodSpec{Affinity: render.SpreadAcrossNodes(in.Selector(contract.APIServerComponent))}

	args, keys := apiServerArgs(in)
	api := render.Container("kube-apiserver", render.Image(in.DefaultImage(contract.APIServerRepository, in.ControlPlane.Spec.Version), spec.Image),
		render.WithResources(spec.Container, render.MemoryRequest(apiServerMemory)), "kube-apiserver", args)
	api.Env = append(api.Env,
		corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		corev1.EnvVar{Name: "GOGC", Value: apiServerGOGC})
	api.Ports = []corev1.ContainerPort{{Name: "https", ContainerPort: contract.APIServerPort}}
	api.ReadinessProbe = render.Probe("/readyz", contract.APIServerPort, corev1.URISchemeHTTPS, 3)
	api.LivenessProbe = render.Probe("/livez", contract.APIServerPort, corev1.URISchemeHTTPS, 8)
	// Started once ready, not merely live: the readiness probe the kubelet
	// runs at once then passes, instead of failing on informers still
	// syncing and waiting ten seconds for its next tick.
	api.StartupProbe = render.StartupProbe("/readyz", contract.APIServerPort, corev1.URISchemeHTTPS, 300)
	render.MountSecrets(&pod, &api,
		render.SecretVolume{Name: "apiserver", Secret: apiServerCertSecret(in), Path: contract.APIServerPKIDir + "/apiserver"},
		render.SecretVolume{Name: "etcd", Secret: apiServerEtcdSecret(in), Path: contract.APIServerPKIDir + "/etcd"},
		render.SecretVolume{Name: "kubelet", Secret: kubeletClientSecret(in), Path: contract.APIServerPKIDir + "/kubelet"},
		render.SecretVolume{Name: "front-proxy", Secret: frontProxyClientSecret(in), Path: contract.APIServerPKIDir + "/front-proxy"})
	render.MountSecrets(&pod, &api, keys...)
	render.MountSecrets(&pod, &api,
		render.SecretVolume{Name: "egress", Secret: egressSelectorName(in), Path: contract.APIServerEgressDir},
		render.SecretVolume{Name: "encryption", Secret: contract.EncryptionSecretName(in.ClusterName()), Path: encryptionConfigDir})
	mountAPIServerFiles(in, &pod, &api)
	mounts, err := mountsDigest(in)
	if err != nil {
		return nil, err
	}

	konn := konnectivityServer{}.container(in, &pod)
	socket := corev1.VolumeMount{Name: "konnectivity-uds", MountPath: konnectivitySocketDir}
	api.VolumeMounts = append(api.VolumeMounts, socket)
	konn.VolumeMounts = append(konn.VolumeMounts, socket)
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "konnectivity-uds", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	pod.Containers = []corev1.Container{api, konn}
	if in.Listener != nil {
		pod.Containers = append(pod.Containers, tunnelServer{}.container(in, &pod))
	}
	if in.ControlPlane.Spec.ManagementServiceAccounts != nil {
		pod.Containers = append(pod.Containers, managementKeys(in))
	}
	if audit := spec.Audit; audit != nil && AuditForwarded(audit.Webhook) {
		pod.InitContainers = append(pod.InitContainers, auditForwarder(in))
	}
	pod = render.HardenedPod(pod, spec.PriorityClassName)
	pod.TerminationGracePeriodSeconds = ptr.To[int64](apiServerGracePeriod)

	// The pods carry the version they run; status.versions counts them.
	labels := in.Labels(contract.APIServerComponent)
	labels[contract.VersionLabel] = in.ControlPlane.Spec.Version
	d := in.Deployment(APIServerName(in), contract.APIServerComponent, in.Stoppable(APIServerReplicas(in.ControlPlane)), labels, pod)
	if mounts != "" {
		d.Spec.Template.Annotations[MountsHashAnnotation] = mounts
	}
	return d, nil
}
