package components

import (
	"fmt"
	"strconv"

	"github.com/blang/semver/v4"
	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

const (
	konnectivitySocketDir = contract.KonnectivitySocketDir
	konnectivitySocket    = konnectivitySocketDir + "/konnectivity-server.socket"
	konnectivityHealth    = 8134
	konnectivityAdmin     = 8133
	// KonnectivityAudience is the audience of the agents' service account
	// tokens, which the konnectivity server reviews.
	KonnectivityAudience = "system:konnectivity-server"

	konnectivityServerCountKey = "server-count"
	konnectivityServerCountEnv = "SERVER_COUNT"
)

// KonnectivityTag is the konnectivity image tag released with a Kubernetes
// minor version (v0.<minor>.0), for the server and the agents.
func KonnectivityTag(v semver.Version) string { return fmt.Sprintf("v0.%d.0", v.Minor) }

// konnectivityServer runs beside each API server: the API server sends
// traffic to nodes and pods through it (its egress selector), and agents in
// the workload cluster dial it (see KonnectivityAgent).
type konnectivityServer struct{}

func konnectivityServerSecret(in render.Input) string { return in.Name("konnectivity-server") }
func konnectivityClientSecret(in render.Input) string { return in.Name("konnectivity-client") }

// konnectivityServerCountName is the ConfigMap that tells each konnectivity
// server how many API servers run.
func konnectivityServerCountName(in render.Input) string { return in.Name("konnectivity-server-count") }

// Certificates are the server's serving certificate for the agents and its
// client certificate towards the API server.
func (konnectivityServer) Certificates(in render.Input) []*cmv1.Certificate {
	svc, ns := contract.APIServerServiceName(in.ClusterName()), in.Namespace()
	sans := []string{konnectivityHost(in), svc, svc + "." + ns, svc + "." + ns + ".svc", "localhost", "127.0.0.1"}
	return []*cmv1.Certificate{
		in.ServerCertificate(konnectivityServerSecret(in), in.ClusterAuthority().ServingIssuer(), "konnectivity-server", sans),
		in.ClientCertificate(konnectivityClientSecret(in), in.ClusterAuthority().Issuer(), "system:konnectivity-server"),
	}
}

// count holds the number of API servers outside the pod template, so that
// scaling the API servers only adds or removes pods instead of rolling
// every one: a new konnectivity server reads the count when it starts, and
// agents follow the count the servers they reach report.
func (konnectivityServer) count(in render.Input) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: in.Meta(konnectivityServerCountName(in), contract.APIServerComponent),
		Data:       map[string]string{konnectivityServerCountKey: strconv.Itoa(int(APIServerReplicas(in.ControlPlane)))},
	}
}

func (konnectivityServer) args(in render.Input) []string {
	pki := "/etc/konnectivity/pki"
	return render.Flags(map[string]string{
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

// konnectivityServerMemory is the memory the konnectivity server asks for
// unless the user sets its resources: an idle one held 34 MiB resident
// (2026-11-29, README "What each container asks for").
const konnectivityServerMemory = "40Mi"

// container is the server's container, whose Secrets it mounts into pod.
func (k konnectivityServer) container(in render.Input, pod *corev1.PodSpec) corev1.Container {
	spec := in.ControlPlane.Spec.Deployment.APIServer.Konnectivity
	c := render.Container("konnectivity-server",
		render.Image(in.DefaultImage(contract.KonnectivityServerRepository, KonnectivityTag(in.Version())), spec.Image),
		render.WithResources(spec, render.MemoryRequest(konnectivityServerMemory)), "/proxy-server", k.args(in))
	c.Ports = []corev1.ContainerPort{{Name: "konnectivity", ContainerPort: contract.KonnectivityPort}}
	c.Env = append(c.Env, corev1.EnvVar{Name: konnectivityServerCountEnv, ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: konnectivityServerCountName(in)},
			Key:                  konnectivityServerCountKey,
		},
	}})
	c.LivenessProbe = render.Probe("/healthz", konnectivityHealth, corev1.URISchemeHTTP, 8)
	render.MountSecrets(pod, &c,
		render.SecretVolume{Name: "konnectivity-server", Secret: konnectivityServerSecret(in), Path: "/etc/konnectivity/pki"},
		render.SecretVolume{Name: "konnectivity-kubeconfig", Secret: kubeconfigName(in, konnectivityUser), Path: "/etc/konnectivity/kubeconfig"},
		render.SecretVolume{Name: "konnectivity-client", Secret: konnectivityClientSecret(in), Path: kubeconfigCertDir})
	return c
}
