package envtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// workloadCluster is the workload cluster of a test, as its users reach it.
type workloadCluster struct {
	client   client.Client
	config   *rest.Config
	auditLog string
}

// startWorkloadCluster makes a second real API server play the workload
// cluster of a control plane that is ready up to its controllers, and lets
// Cluster API's ClusterCache in the controller connect to it.
//
// The second API server is the hosted API server itself: runHostedAPIServer
// runs kube-apiserver v1.36.3 with the flags of the Deployment the controller
// rendered and the certificates cert-manager issued, on 127.0.0.1:port. The
// control plane is exposed as ClusterIP with that address as its endpoint, so
// the <cluster>-kubeconfig the controller writes reaches it with nothing
// faked or redirected: the same path a real management cluster takes, where
// the endpoint routes to the API server pods. The test then plays Cluster
// API, which marks the Cluster's infrastructure provisioned; only then does
// the ClusterCache connect.
func startWorkloadCluster(t *testing.T, name, version string) (*clusterv1.Cluster, *v1alpha1.HostedControlPlane, *workloadCluster) {
	t.Helper()
	port := freePort(t)
	cluster, hcp := readyControlPlane(t, name, version, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(port)}
		// The endpoint serves the issuer's discovery document, as a
		// cloud's identity federation fetches it.
		h.Spec.ServiceAccountIssuer = fmt.Sprintf("https://127.0.0.1:%d", port)
	})
	w := &workloadCluster{auditLog: runHostedAPIServer(t, hcp.Namespace, name, port)}
	runningPod(t, hcp, name+"-apiserver-a", version)
	waitCondition(t, hcp, v1alpha1.AvailableCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	// Until the Cluster says so, the ClusterCache does not connect.
	c := waitCondition(t, hcp, v1alpha1.NodeJoinReadyCondition, metav1.ConditionFalse, v1alpha1.WorkloadUnreachableReason)
	assert.Contains(t, c.Message, "cannot reach the workload cluster through Cluster API's cluster cache")
	setStatus(t, cluster, func(c *clusterv1.Cluster) { c.Status.Initialization.InfrastructureProvisioned = ptr.To(true) })

	secret := get(t, &corev1.Secret{}, hcp.Namespace, name+"-kubeconfig")
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	require.NoError(t, err)
	cfg.UserAgent = "workload-test" // the controller's writes are told apart by its user agent
	w.config = cfg
	w.client, err = client.New(cfg, client.Options{Scheme: Scheme()})
	require.NoError(t, err)
	return cluster, hcp, w
}

// get waits for an object of the workload cluster and reads it.
func (w *workloadCluster) get(t *testing.T, obj client.Object, ns, name string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%T %s/%s in the workload cluster", obj, ns, name), func() error {
		return w.client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: name}, obj)
	})
}

// controllerWrites are the writes the controller made to the workload
// cluster since a time.
func (w *workloadCluster) controllerWrites(t *testing.T, since time.Time) []Write {
	t.Helper()
	all, err := ReadWrites(w.auditLog, since)
	require.NoError(t, err)
	var writes []Write
	for _, wr := range all {
		if wr.UserAgent == contract.ManagedBy {
			writes = append(writes, wr)
		}
	}
	return writes
}

// rollOut plays the workload cluster's controllers and nodes: every add-on
// runs its current spec.
func (w *workloadCluster) rollOut(t *testing.T) {
	t.Helper()
	ctx := testContext(t)
	for _, name := range []string{components.CoreDNSName, components.KonnectivityAgentName} {
		require.NoError(t, RollOutDeployment(ctx, w.client, client.ObjectKey{Namespace: "kube-system", Name: name}))
	}
	err := RollOutDaemonSet(ctx, w.client, client.ObjectKey{Namespace: "kube-system", Name: components.KubeProxyName})
	require.NoError(t, client.IgnoreNotFound(err))
}

func (w *workloadCluster) image(t *testing.T, obj client.Object, name string) string {
	t.Helper()
	w.get(t, obj, "kube-system", name)
	return firstImage(t, obj)
}

// hasRepairEvent waits for a Repaired event about the control plane whose
// note names what.
func hasRepairEvent(t *testing.T, hcp *v1alpha1.HostedControlPlane, what string) {
	t.Helper()
	waitFor(t, "a Repaired event for "+what, func() error {
		events := &eventsv1.EventList{}
		if err := env.Client.List(testContext(t), events, client.InNamespace(hcp.Namespace)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == hcp.Name && e.Reason == v1alpha1.RepairedReason && strings.Contains(e.Note, what) {
				return nil
			}
		}
		return fmt.Errorf("%d events, none Repaired about %s", len(events.Items), what)
	})
}

// The controller keeps, inside a real workload API server, what kubeadm
// workers need to join and the core add-ons; it heals deletions and edits,
// writes nothing while nothing changed, removes kube-proxy when disabled and
// upgrades the add-ons only once the control plane runs the new version.
// Not parallel: it waits until the whole controller is quiet (waitQuiet).
func TestWorkloadCluster(t *testing.T) {
	serial(t)
	_, hcp, w := startWorkloadCluster(t, "work", "v1.35.2")
	waitCondition(t, hcp, v1alpha1.NodeJoinReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	// This API server's endpoint is on loopback, which no EndpointSlice may
	// hold: the condition says pods cannot reach it through the Service.
	c := waitCondition(t, hcp, v1alpha1.KubernetesServiceReadyCondition, metav1.ConditionFalse, v1alpha1.NoServiceEndpointReason)
	assert.Contains(t, c.Message, "pods cannot reach the API server through the kubernetes Service")
	// No node has joined yet: the add-ons are applied, nothing can run them,
	// and that is how a new cluster is, not a fault.
	c = waitCondition(t, hcp, v1alpha1.CoreDNSReadyCondition, metav1.ConditionTrue, v1alpha1.NoNodesReason)
	assert.Equal(t, "applied; no node has joined the workload cluster yet, and its pods start once one does", c.Message)
	waitCondition(t, hcp, v1alpha1.KonnectivityAgentReadyCondition, metav1.ConditionTrue, v1alpha1.NoNodesReason)
	waitCondition(t, hcp, v1alpha1.AvailableCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	shownWell(t, hcp, v1alpha1.KubernetesServiceReadyCondition, v1alpha1.NoServiceEndpointReason)
	// Once one joins, pods that do not run are told: at the next pass, which
	// the Deployment's status brings as its pods start (here, a touch).
	require.NoError(t, w.client.Create(testContext(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0"}}))
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, "example.com/node-joined", "worker-0")
	}))
	c = waitCondition(t, hcp, v1alpha1.CoreDNSReadyCondition, metav1.ConditionFalse, v1alpha1.ProgressingReason)
	assert.Contains(t, c.Message, "Deployment coredns: 0 of 2 available")

	t.Run("a kubeadm worker can discover and join", func(t *testing.T) { joinObjects(t, hcp, w) })
	t.Run("service account issuer discovery", func(t *testing.T) { issuerDiscovery(t, hcp, w) })
	t.Run("add-ons", func(t *testing.T) { addons(t, hcp, w) })
	t.Run("an unchanged workload cluster costs no writes", func(t *testing.T) {
		waitQuiet(t)
		since := time.Now()
		noWritesWhenUnchanged(t, hcp)
		assert.Empty(t, w.controllerWrites(t, since), "the controller wrote to an unchanged workload cluster")
	})
	t.Run("deletions and edits are repaired", func(t *testing.T) { repairs(t, hcp, w) })
	t.Run("disabled kube-proxy is removed", func(t *testing.T) { disableKubeProxy(t, hcp, w) })
	t.Run("add-ons follow the control plane's upgrade", func(t *testing.T) { upgradeAddons(t, hcp, w) })
}

// joinObjects checks what `kubeadm join` does with a bootstrap token: read
// cluster-info anonymously, then, authenticated by the token, read
// kubeadm-config and kubelet-config, look up its Node and post a CSR that
// the approver may approve.
func joinObjects(t *testing.T, hcp *v1alpha1.HostedControlPlane, w *workloadCluster) {
	ctx := testContext(t)
	// The kubeadm bootstrap provider reads the cluster CA from <cluster>-ca:
	// tls.crt for the discovery hashes, tls.key where it needs the key.
	caSecret := get(t, &corev1.Secret{}, hcp.Namespace, "work-ca")
	ca := caSecret.Data["tls.crt"]
	assert.NotEmpty(t, ca)
	assert.NotEmpty(t, caSecret.Data["tls.key"])
	assert.Equal(t, "work", caSecret.Labels[clusterv1.ClusterNameLabel])

	// kubeadm reads with a plain clientset, which needs no discovery.
	public, err := kubernetes.NewForConfig(rest.AnonymousClientConfig(w.config))
	require.NoError(t, err)
	info, err := public.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
	require.NoError(t, err, "cluster-info is readable anonymously")
	discovery, err := clientcmd.Load([]byte(info.Data["kubeconfig"]))
	require.NoError(t, err)
	require.Len(t, discovery.Clusters, 1)
	for _, c := range discovery.Clusters {
		assert.Equal(t, w.config.Host, c.Server, "cluster-info names the endpoint")
		assert.Equal(t, string(ca), string(c.CertificateAuthorityData), "cluster-info carries the CA of <cluster>-ca, which the bootstrap provider pins")
	}

	// A bootstrap token as the kubeadm bootstrap provider creates one.
	require.NoError(t, w.client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "bootstrap-token-abcdef"},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id": "abcdef", "token-secret": "0123456789abcdef",
			"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
			"auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token",
		},
	}))
	tokenConfig := rest.AnonymousClientConfig(w.config)
	tokenConfig.BearerToken = "abcdef.0123456789abcdef"
	joiner, err := kubernetes.NewForConfig(tokenConfig)
	require.NoError(t, err)

	var kubeadmConfig *corev1.ConfigMap
	waitFor(t, "the bootstrap token reads kubeadm-config", func() error {
		// The API server learns of new tokens through its informer.
		kubeadmConfig, err = joiner.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
		return err
	})
	var clusterConfig struct {
		APIVersion, Kind, KubernetesVersion, ControlPlaneEndpoint string
		Networking                                                struct{ ServiceSubnet, PodSubnet, DNSDomain string }
	}
	require.NoError(t, yaml.Unmarshal([]byte(kubeadmConfig.Data["ClusterConfiguration"]), &clusterConfig))
	assert.Equal(t, "kubeadm.k8s.io/v1beta4", clusterConfig.APIVersion)
	assert.Equal(t, "ClusterConfiguration", clusterConfig.Kind)
	assert.Equal(t, "v1.35.2", clusterConfig.KubernetesVersion)
	assert.Equal(t, strings.TrimPrefix(w.config.Host, "https://"), clusterConfig.ControlPlaneEndpoint)
	assert.Equal(t, "10.96.0.0/12", clusterConfig.Networking.ServiceSubnet)

	kubeletConfig, err := joiner.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubelet-config", metav1.GetOptions{})
	require.NoError(t, err)
	var kubelet struct {
		Kind          string
		ClusterDNS    []string
		ClusterDomain string
	}
	require.NoError(t, yaml.Unmarshal([]byte(kubeletConfig.Data["kubelet"]), &kubelet))
	assert.Equal(t, "KubeletConfiguration", kubelet.Kind)
	assert.Equal(t, []string{"10.96.0.10"}, kubelet.ClusterDNS, "kubelets use the kube-dns Service")
	assert.Equal(t, "cluster.local", kubelet.ClusterDomain)

	_, err = joiner.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a joining node may look up Nodes: %v", err)
	for _, subresource := range []string{"", "nodeclient"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: subresource, Verb: "create",
			},
		}}
		review, err := joiner.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.True(t, review.Status.Allowed, "a bootstrap token may create certificatesigningrequests/%s (%s)", subresource, review.Status.Reason)
	}
	// Nodes renew their certificates through auto-approved CSRs.
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "system:node:worker-1", Groups: []string{"system:nodes"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: "selfnodeclient", Verb: "create",
		},
	}}
	require.NoError(t, w.client.Create(ctx, review))
	assert.True(t, review.Status.Allowed, "nodes may renew their client certificates (%s)", review.Status.Reason)
}

// addons checks CoreDNS, kube-proxy and the konnectivity agents as a user
// of the workload cluster finds them.
func addons(t *testing.T, hcp *v1alpha1.HostedControlPlane, w *workloadCluster) {
	dns := &corev1.Service{}
	w.get(t, dns, "kube-system", "kube-dns")
	assert.Equal(t, "10.96.0.10", dns.Spec.ClusterIP, "the cluster DNS is the tenth address of the service network")
	corefile := &corev1.ConfigMap{}
	w.get(t, corefile, "kube-system", "coredns")
	assert.Contains(t, corefile.Data["Corefile"], "kubernetes cluster.local in-addr.arpa ip6.arpa")
	assert.Equal(t, "registry.k8s.io/coredns/coredns:v1.13.1", w.image(t, &appsv1.Deployment{}, "coredns"), "CoreDNS of Kubernetes 1.35")
	assert.Equal(t, "registry.k8s.io/kube-proxy:v1.35.2", w.image(t, &appsv1.DaemonSet{}, "kube-proxy"))

	agent := &appsv1.Deployment{}
	w.get(t, agent, "kube-system", "konnectivity-agent")
	assert.Equal(t, "registry.k8s.io/kas-network-proxy/proxy-agent:v0.35.0", agent.Spec.Template.Spec.Containers[0].Image)
	assert.Contains(t, agent.Spec.Template.Spec.Containers[0].Args, "--proxy-server-host=127.0.0.1")
	assert.Contains(t, agent.Spec.Template.Spec.Containers[0].Args, "--proxy-server-port=8132", "agents dial the konnectivity port of the exposure")

	w.rollOut(t)
	for _, condition := range []string{v1alpha1.CoreDNSReadyCondition, v1alpha1.KubeProxyReadyCondition, v1alpha1.KonnectivityAgentReadyCondition} {
		waitCondition(t, hcp, condition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	}

	// The spec tunes the add-ons.
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.CoreDNS.Replicas = ptr.To[int32](3)
		h.Spec.CoreDNS.Image = &v1alpha1.ImageSpec{Registry: ptr.To("mirror.example.com")}
	}))
	waitFor(t, "CoreDNS takes the spec", func() error {
		d := &appsv1.Deployment{}
		if err := w.client.Get(testContext(t), client.ObjectKey{Namespace: "kube-system", Name: "coredns"}, d); err != nil {
			return err
		}
		if ptr.Deref(d.Spec.Replicas, 0) != 3 || d.Spec.Template.Spec.Containers[0].Image != "mirror.example.com/coredns/coredns:v1.13.1" {
			return fmt.Errorf("replicas %d, image %s", ptr.Deref(d.Spec.Replicas, 0), d.Spec.Template.Spec.Containers[0].Image)
		}
		return nil
	})
	waitCondition(t, hcp, v1alpha1.CoreDNSReadyCondition, metav1.ConditionFalse, v1alpha1.ProgressingReason)
	w.rollOut(t)
	waitCondition(t, hcp, v1alpha1.CoreDNSReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
}

// repairs deletes and edits objects as a careless user of the workload
// cluster would, and expects them back with an event each.
func repairs(t *testing.T, hcp *v1alpha1.HostedControlPlane, w *workloadCluster) {
	ctx := testContext(t)
	since := time.Now()
	defer func() {
		// The audit log sees the controller's repairs: its silence while
		// nothing changed means something.
		assert.NotEmpty(t, w.controllerWrites(t, since), "no write of the controller in the workload cluster's audit log")
	}()
	dns := &appsv1.Deployment{}
	w.get(t, dns, "kube-system", "coredns")
	require.NoError(t, w.client.Delete(ctx, dns))
	waitFor(t, "coredns is recreated", func() error {
		again := &appsv1.Deployment{}
		if err := w.client.Get(ctx, client.ObjectKeyFromObject(dns), again); err != nil {
			return err
		}
		if again.UID == dns.UID {
			return fmt.Errorf("still the deleted one")
		}
		return nil
	})
	hasRepairEvent(t, hcp, "recreated Deployment kube-system/coredns")

	binding := &rbacv1.ClusterRoleBinding{}
	w.get(t, binding, "", "kubeadm:kubelet-bootstrap")
	require.NoError(t, w.client.Delete(ctx, binding))
	w.get(t, &rbacv1.ClusterRoleBinding{}, "", "kubeadm:kubelet-bootstrap")
	hasRepairEvent(t, hcp, "recreated ClusterRoleBinding kubeadm:kubelet-bootstrap")

	corefile := &corev1.ConfigMap{}
	w.get(t, corefile, "kube-system", "coredns")
	want := corefile.Data["Corefile"]
	require.NoError(t, w.client.Patch(ctx, corefile, client.RawPatch(types.MergePatchType, []byte(`{"data":{"Corefile":".:53 { whoami }"}}`))))
	waitFor(t, "the Corefile is restored", func() error {
		if err := w.client.Get(ctx, client.ObjectKeyFromObject(corefile), corefile); err != nil {
			return err
		}
		if corefile.Data["Corefile"] != want {
			return fmt.Errorf("Corefile %q", corefile.Data["Corefile"])
		}
		return nil
	})
	hasRepairEvent(t, hcp, "restored ConfigMap kube-system/coredns")

	role := &rbacv1.RoleBinding{}
	w.get(t, role, "kube-system", "kubeadm:kubelet-config")
	require.NoError(t, w.client.Patch(ctx, role, client.RawPatch(types.MergePatchType, []byte(`{"subjects":[{"kind":"User","name":"mallory","apiGroup":"rbac.authorization.k8s.io"}]}`))))
	waitFor(t, "joining nodes may read kubelet-config again", func() error {
		if err := w.client.Get(ctx, client.ObjectKeyFromObject(role), role); err != nil {
			return err
		}
		if len(role.Subjects) != 2 || role.Subjects[1].Name != "system:bootstrappers:kubeadm:default-node-token" {
			return fmt.Errorf("subjects %v", role.Subjects)
		}
		return nil
	})
	hasRepairEvent(t, hcp, "restored RoleBinding kube-system/kubeadm:kubelet-config")
	waitCondition(t, hcp, v1alpha1.AvailableCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
}

// disableKubeProxy turns kube-proxy off, for a CNI that replaces it.
func disableKubeProxy(t *testing.T, hcp *v1alpha1.HostedControlPlane, w *workloadCluster) {
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) { h.Spec.KubeProxy.Disabled = ptr.To(true) }))
	c := waitCondition(t, hcp, v1alpha1.KubeProxyReadyCondition, metav1.ConditionTrue, v1alpha1.DisabledReason)
	assert.Equal(t, "disabled by the spec; removed from the workload cluster", c.Message)
	ctx := testContext(t)
	for _, obj := range []client.Object{
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:node-proxier"}},
	} {
		waitFor(t, fmt.Sprintf("%T %s is gone", obj, obj.GetName()), func() error {
			switch err := w.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return err
			}
			return fmt.Errorf("still there")
		})
	}
	w.get(t, &appsv1.Deployment{}, "kube-system", "coredns") // the rest stays
}

// upgradeAddons moves the control plane to a new minor: the add-ons and the
// join configuration stay while the API servers roll out, and move once
// status.versions reports the new version.
func upgradeAddons(t *testing.T, hcp *v1alpha1.HostedControlPlane, w *workloadCluster) {
	ns := hcp.Namespace
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.Version = "v1.36.3"
		h.Spec.KubeProxy.Disabled = nil
	}))
	w.get(t, &appsv1.DaemonSet{}, "kube-system", "kube-proxy")
	rollOutStatefulSet(t, ns, "work-etcd")
	waitFor(t, "the API servers move", func() error {
		if img := image(t, &appsv1.Deployment{}, ns, "work-apiserver"); img != "registry.k8s.io/kube-apiserver:v1.36.3" {
			return fmt.Errorf("apiserver image %s", img)
		}
		return nil
	})
	rollOutDeployment(t, ns, "work-apiserver")
	rollOutDeployment(t, ns, "work-controller-manager")
	rollOutDeployment(t, ns, "work-scheduler")
	waitCondition(t, hcp, v1alpha1.ControllersReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	waitQuiet(t)
	assert.Equal(t, "registry.k8s.io/kube-proxy:v1.35.2", w.image(t, &appsv1.DaemonSet{}, "kube-proxy"), "kube-proxy waits while an old API server runs")
	assert.Equal(t, "mirror.example.com/coredns/coredns:v1.13.1", w.image(t, &appsv1.Deployment{}, "coredns"))

	runningPod(t, hcp, "work-apiserver-b", "v1.36.3")
	require.NoError(t, env.Client.Delete(testContext(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work-apiserver-a"}}))
	waitFor(t, "the add-ons move to v1.36", func() error {
		proxy, dns := w.image(t, &appsv1.DaemonSet{}, "kube-proxy"), w.image(t, &appsv1.Deployment{}, "coredns")
		if proxy != "registry.k8s.io/kube-proxy:v1.36.3" || dns != "mirror.example.com/coredns/coredns:v1.14.2" {
			return fmt.Errorf("kube-proxy %s, coredns %s", proxy, dns)
		}
		return nil
	})
	config := &corev1.ConfigMap{}
	w.get(t, config, "kube-system", "kubeadm-config")
	assert.Contains(t, config.Data["ClusterConfiguration"], "kubernetesVersion: v1.36.3")
}

// issuerDiscovery fetches, anonymously through the endpoint as a cloud's
// identity federation does, the discovery document of
// spec.serviceAccountIssuer and its keys, and verifies with them a token
// the API server issued: it names the issuer. Nothing else is anonymous:
// discovery of the API, Secrets and Namespaces stay refused.
func issuerDiscovery(t *testing.T, hcp *v1alpha1.HostedControlPlane, w *workloadCluster) {
	ctx := testContext(t)
	issuer := hcp.Spec.ServiceAccountIssuer
	anonymous, err := rest.HTTPClientFor(rest.AnonymousClientConfig(w.config))
	require.NoError(t, err)
	fetch := func(path string) (int, []byte) {
		resp, err := anonymous.Get(w.config.Host + path)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, body
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	waitFor(t, "the discovery document served anonymously", func() error {
		code, body := fetch("/.well-known/openid-configuration")
		if code != http.StatusOK {
			return fmt.Errorf("status %d: %s", code, body)
		}
		return json.Unmarshal(body, &doc)
	})
	assert.Equal(t, issuer, doc.Issuer)
	assert.Equal(t, issuer+"/openid/v1/jwks", doc.JWKSURI, "the keys are found at the issuer")
	code, body := fetch("/openid/v1/jwks")
	require.Equal(t, http.StatusOK, code, "%s", body)
	keys := jose.JSONWebKeySet{}
	require.NoError(t, json.Unmarshal(body, &keys))
	require.NotEmpty(t, keys.Keys)

	// A token of a service account, as the kubelet asks for it, names the
	// issuer and is signed by a key of the set.
	cs, err := kubernetes.NewForConfig(w.config)
	require.NoError(t, err)
	_, err = cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "federated"}}, metav1.CreateOptions{})
	require.NoError(t, client.IgnoreAlreadyExists(err))
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "federated",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"sts.example.com"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	signed, err := jwt.ParseSigned(tr.Status.Token, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	require.NoError(t, err)
	claims := jwt.Claims{}
	require.NoError(t, signed.Claims(keys.Keys[0].Key, &claims), "the token verifies with the served key")
	assert.Equal(t, issuer, claims.Issuer)
	assert.Contains(t, []string(claims.Audience), "sts.example.com")

	for _, path := range []string{"/api", "/apis", "/api/v1/namespaces", "/api/v1/namespaces/kube-system/secrets"} {
		code, body := fetch(path)
		assert.Equal(t, http.StatusForbidden, code, "%s is not anonymous: %s", path, body)
	}
}

// shownWell checks what an operator sees of a control plane that came up
// well: every condition true but Paused (false: not paused, as Cluster
// API's contract says) and the condition except, false for reason, which
// this test's setup cannot make true; kubectl get hcp naming that one alone
// as failing; and no Warning event about the control plane (what kubectl
// describe hcp lists) recorded on the way but that condition's.
func shownWell(t *testing.T, hcp *v1alpha1.HostedControlPlane, except, reason string) {
	t.Helper()
	waitFor(t, "every condition true but "+except, func() error {
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp); err != nil {
			return err
		}
		var wrong []string
		for _, c := range hcp.Status.Conditions {
			want := metav1.ConditionTrue
			if c.Type == clusterv1.PausedCondition || c.Type == except {
				want = metav1.ConditionFalse
			}
			if c.Status != want || (c.Type == except && c.Reason != reason) {
				wrong = append(wrong, fmt.Sprintf("%s %s %s: %s", c.Type, c.Status, c.Reason, c.Message))
			}
		}
		if len(wrong) > 0 {
			return fmt.Errorf("%s", strings.Join(wrong, "; "))
		}
		return nil
	})

	lines := strings.Split(strings.TrimRight(kubectl(t, "get", "hcp", hcp.Name, "-n", hcp.Namespace), "\n"), "\n")
	require.Len(t, lines, 2)
	from, to := strings.Index(lines[0], "FAILING"), strings.Index(lines[0], "INITIALIZED")
	require.True(t, from > 0 && to > from, lines[0])
	assert.Equal(t, []string{except, reason}, strings.Fields(lines[1][from:to]), "FAILING and REASON:\n%s", strings.Join(lines, "\n"))

	events := &eventsv1.EventList{}
	require.NoError(t, env.Client.List(testContext(t), events, client.InNamespace(hcp.Namespace)))
	for _, e := range events.Items {
		regardsIt := e.Regarding.Kind == "HostedControlPlane" && e.Regarding.Name == hcp.Name
		if regardsIt && e.Type == corev1.EventTypeWarning && (e.Reason != reason || e.Action != except) {
			t.Errorf("Warning event %s on %s %s (%s): %s", e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Action, e.Note)
		}
	}
}
