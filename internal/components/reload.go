package components

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
)

// A renewed leaf certificate reaches the processes that use it without a
// failed request. cert-manager renews it (two thirds through its lifetime)
// into the same Secret, and the kubelet updates the Secret's files in every
// pod that mounts it within about a minute. Then:
//
//   - a process that reads its certificate and key again when the files
//     change keeps running: etcd (serving and peer certificates, loaded at
//     every TLS handshake), the API server (its serving certificate and its
//     front-proxy client certificate, watched by its dynamic certificate
//     content; its client certificates towards kubelets and etcd, loaded
//     per connection), the controller manager, the scheduler and the
//     konnectivity server towards the API server (client-go reloads a
//     kubeconfig's certificate files every five minutes), the gateway
//     tunnel's server (its files, checked at every connection). The
//     certificate they present is checked by their peers only when a
//     connection opens, so open connections, watches among them, carry on,
//     but for client-go's: once it sees a new client certificate it closes
//     the connections it opened with the old one. So the controllers' watches
//     start again (they resume by themselves), and so do the API server's
//     streams to kubelets when its kubelet client certificate is renewed:
//     a kubectl logs -f, exec or port-forward open at that moment ends;
//   - the rest of what they mount is read at start, and the pods roll when
//     it changes, a new pod ready before an old one goes (maxUnavailable 0)
//     and the API server draining gracefully (see apiServerShutdownDelay):
//     the konnectivity server's serving certificate, the service account
//     key, the configuration Secrets, and every CA certificate (ca.crt),
//     which a renewed or rotated authority changes.
//
// The service account key's Secrets (the new key's too, during a rotation)
// also hold a certificate, which cert-manager renews with the key kept and
// no process reads.
//
// The pod templates therefore digest, of the Secrets StartupKeys lists, only
// the keys it names, and all of every other Secret they mount.
type reloading interface {
	// Reloaded are the Secrets of the part whose certificate and key its
	// process reads again when they change.
	Reloaded(in render.Input) []string
}

// StartupKeys are, by Secret, the keys its pods read at start when they
// read the others again or not at all: the CA of the Secrets whose
// certificate and key every process that mounts them reads again, and the
// service account key.
func StartupKeys(in render.Input) map[string][]string {
	keys := map[string][]string{in.SASecret(): {corev1.TLSPrivateKeyKey}, in.SANextSecret(): {corev1.TLSPrivateKeyKey}}
	for _, part := range certifiedParts() {
		if r, ok := part.(reloading); ok {
			for _, name := range r.Reloaded(in) {
				keys[name] = []string{render.CAKey}
			}
		}
	}
	// While etcd's members and the API servers trust the etcd CA's trust
	// Secret, they read nothing at start of the Secrets of their etcd
	// certificates: certificates issued again reach them at their next
	// handshakes (which a rotation checks of the members,
	// etcd.Checker.Presents) instead of restarting every member, and so
	// moving etcd's leadership, once more.
	if in.EtcdCA().Trusted() {
		for _, name := range append((etcd.Component{}).Reloaded(in), apiServerEtcdSecret(in)) {
			keys[name] = nil
		}
	}
	return keys
}

// Reloaded: the API server watches its serving certificate and its
// front-proxy client certificate, and loads its client certificates towards
// kubelets and etcd for each connection.
func (APIServer) Reloaded(in render.Input) []string {
	return []string{apiServerCertSecret(in), kubeletClientSecret(in), apiServerEtcdSecret(in), frontProxyClientSecret(in)}
}

// Reloaded: the controller manager reads its kubeconfig's client
// certificate again when it changes.
func (ControllerManager) Reloaded(in render.Input) []string {
	return []string{controllerManagerCertSecret(in)}
}

// Reloaded: the scheduler reads its kubeconfig's client certificate again
// when it changes.
func (Scheduler) Reloaded(in render.Input) []string { return []string{schedulerCertSecret(in)} }

// Reloaded: the konnectivity server reads its kubeconfig's client
// certificate again when it changes, but its serving certificate only at
// start.
func (konnectivityServer) Reloaded(in render.Input) []string {
	return []string{konnectivityClientSecret(in)}
}

// Reloaded: the tunnel's server checks its certificate files at every
// connection. Named whether or not the control plane is served through a
// gateway: StartupKeys is asked before the gateway is observed.
func (tunnelServer) Reloaded(in render.Input) []string { return []string{tunnelCertSecret(in)} }

// etcd's Reloaded is in its package.
var _ reloading = etcd.Component{}
