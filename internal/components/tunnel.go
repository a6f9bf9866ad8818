package components

import (
	"strconv"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// tunnelServer is the sidecar, in gateway mode, that ends the outer TLS of
// the kubernetes Service's tunnel (see KubernetesService) and hands the
// bytes inside, the pod's own TLS, to the API server beside it.
type tunnelServer struct{}

func tunnelCertSecret(in render.Input) string { return in.Name("kas-tunnel") }

// Certificates: in gateway mode, the tunnel's outer TLS, which nodes verify
// with the cluster CA.
func (tunnelServer) Certificates(in render.Input) []*cmv1.Certificate {
	if in.Listener == nil {
		return nil
	}
	return []*cmv1.Certificate{in.ServerCertificate(tunnelCertSecret(in), in.ClusterAuthority().ServingIssuer(), "kas-tunnel", []string{tunnelHost(in)})}
}

// container is the sidecar, whose certificate it mounts into pod.
func (tunnelServer) container(in render.Input, pod *corev1.PodSpec) corev1.Container {
	const pki = "/etc/tunnel/pki"
	c := render.Container("tunnel", in.Settings.TunnelImage, v1alpha1.Container{}, "/tunnel", []string{
		"server",
		"--listen=:" + strconv.Itoa(contract.TunnelPort),
		"--health-listen=:" + strconv.Itoa(contract.TunnelHealthPort),
		"--upstream=127.0.0.1:" + strconv.Itoa(contract.APIServerPort),
		"--cert-file=" + pki + "/tls.crt",
		"--key-file=" + pki + "/tls.key",
	})
	c.Ports = []corev1.ContainerPort{{Name: contract.TunnelPortName, ContainerPort: contract.TunnelPort}}
	// The tunnel stops accepting when told to stop, but the Gateway keeps
	// sending it new connections until the pod's endpoint has left: it is
	// told only after the API server's shutdown delay, as long as the API
	// server beside it keeps serving (an API server rolling in gateway mode
	// reset pods' connections otherwise, TestWorkerJoinsThroughGateway).
	c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
		Sleep: &corev1.SleepAction{Seconds: int64(apiServerShutdownDelay.Seconds())},
	}}
	c.ReadinessProbe = render.Probe("/readyz", contract.TunnelHealthPort, corev1.URISchemeHTTP, 3)
	c.LivenessProbe = render.Probe("/healthz", contract.TunnelHealthPort, corev1.URISchemeHTTP, 3)
	render.MountSecrets(pod, &c, render.SecretVolume{Name: "tunnel", Secret: tunnelCertSecret(in), Path: pki})
	return c
}
