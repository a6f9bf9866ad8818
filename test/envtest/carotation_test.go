package envtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/test/pkitest"
)

// An emergency rotation (rotate=emergency, with the old service account
// key dropped as soon as nothing signs with it) rotates the service account
// key, the encryption key, the etcd CA and the front proxy CA side by side
// on one control plane with three real etcd members (peers over TLS) and
// two real API servers, each restarted one at a time whenever its template
// changes, as the StatefulSet and Deployment controllers roll pods (the
// controller manager's pods are played), while a client reads and writes
// through the API servers that are in service (one is taken out of
// service, its requests drained, before it stops, as its endpoint is
// before a pod terminates) and the controller talks to the members as it
// does (the health-check client certificate, at the pods' addresses). No
// request fails in any phase, and each condition names each phase.
//
// etcd: before, a client certificate the old etcd CA signed, and one the
// cluster CA signed, are accepted by every member (the etcd CA was an
// intermediate under the cluster CA, whose root the members trusted);
// after, both are refused, and the etcd CA is a root of its own.
//
// Front proxy: the API servers take a request that the front proxy
// forwards (its client certificate, the user in X-Remote-User) from a
// certificate of the old CA before, and refuse it after; they take one of
// the new CA's, and publish the new CA to extension API servers
// (kube-system/extension-apiserver-authentication).
//
// Service account key: a token of the old key is accepted before and
// refused after; a token asked for after is signed by the new key.
// Encryption key: every Secret is stored under the new key afterwards, and
// reads back unchanged.
//
// Cluster CA, rotated beside (rotate=emergency,cluster-ca): the workload
// cluster has a node, so the rotation waits in WaitingForKubelets, saying
// that none of one node renewed, until a kubelet client request of the
// workload cluster carries a certificate the new CA signed for the node
// (the test plays the kubelet's renewal and the controller manager's
// signature); then it goes on, long before the year of the certificates'
// lifetime.
func TestEmergencyRotation(t *testing.T) {
	hosted(t)
	const name = "emerg"
	ports := []int{freePort(t), freePort(t)}
	cluster, hcp := readyControlPlane(t, name, "v1.36.3", func(h *v1alpha1.HostedControlPlane) {
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(ports[0])}
	})
	ns := hcp.Namespace
	members := runEtcdMembers(t, hcp, 3)
	apis := newAPIServers(t, members.hosted(), ports)
	rollPods(t, hcp)
	controllers := map[string]string{}
	for _, d := range []string{name + "-controller-manager", name + "-scheduler"} {
		controllers[d] = templateOf(get(t, &appsv1.Deployment{}, ns, d).Spec.Template)
	}
	// The controller reaches the workload cluster (to rewrite its Secrets).
	setStatus(t, cluster, func(c *clusterv1.Cluster) { c.Status.Initialization.InfrastructureProvisioned = ptr.To(true) })
	for _, c := range []string{
		v1alpha1.EtcdCAReadyCondition, v1alpha1.FrontProxyCAReadyCondition, v1alpha1.EtcdReadyCondition,
		v1alpha1.ServiceAccountKeyReadyCondition, v1alpha1.EncryptionReadyCondition,
	} {
		waitCondition(t, hcp, c, metav1.ConditionTrue, v1alpha1.ReadyReason)
	}
	before := get(t, &v1alpha1.HostedControlPlane{}, ns, name).Status.Encryption.Key
	require.NotEmpty(t, before)

	oldEtcdCA := get(t, &corev1.Secret{}, ns, name+"-etcd")
	byOldEtcdCA := signedClient(t, oldEtcdCA)
	admin := adminCredentials(t, ns, name)
	for _, m := range members.members {
		assert.NoError(t, members.dial(t, m, byOldEtcdCA), "before: a certificate of the old etcd CA is accepted")
		assert.NoError(t, members.dial(t, m, admin), "before: etcd trusts what the cluster CA signs")
	}
	load := startLoad(t, ns, name, ports) // once each API server answers: its RBAC bootstrapped, alice may ask who she is
	oldProxyCA := get(t, &corev1.Secret{}, ns, name+"-proxy")
	byOldProxyCA := signedClientOf(t, oldProxyCA, "front-proxy-client")
	assert.Equal(t, "alice", proxiedUser(t, ports[0], byOldProxyCA), "before: the front proxy's certificate of the old CA is taken")
	workload := workloadClient(t, ns, name)
	ctx := testContext(t)
	answered(t, func() error {
		_, err := workload.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
		return err
	})
	answered(t, func() error {
		_, err := workload.CoreV1().ServiceAccounts("app").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
		return err
	})
	for i := range 5 {
		answered(t, func() error {
			_, err := workload.CoreV1().Secrets("app").Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%d", i)}, Data: map[string][]byte{"password": fmt.Appendf(nil, "kept-%d", i)},
			}, metav1.CreateOptions{})
			return err
		})
	}
	oldToken := appToken(t, workload)
	tokenAccepted(t, workload, oldToken)
	// A node, whose kubelet holds a client certificate of the old cluster
	// CA until it renews it (below).
	const node = "worker-0"
	answered(t, func() error {
		_, err := workload.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
		return err
	})

	oldClusterCA := get(t, &corev1.Secret{}, ns, name+"-ca")
	oldKubeconfig := get(t, &corev1.Secret{}, ns, name+"-kubeconfig")
	for _, port := range ports {
		assert.Equal(t, "mallory", certUser(t, port, signedClientOf(t, oldClusterCA, "mallory")), "before: a client certificate of the cluster CA is taken")
	}
	clusterReasons := watchReasons(t, hcp, v1alpha1.ClusterCAReadyCondition)
	etcdReasons := watchReasons(t, hcp, v1alpha1.EtcdCAReadyCondition)
	proxyReasons := watchReasons(t, hcp, v1alpha1.FrontProxyCAReadyCondition)
	saReasons := watchReasons(t, hcp, v1alpha1.ServiceAccountKeyReadyCondition)
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Annotations[v1alpha1.RotateAnnotation] = v1alpha1.RotateEmergency + "," + v1alpha1.RotateClusterCA
		h.Annotations[v1alpha1.DropOldServiceAccountKeyAnnotation] = "true"
	}))
	start := time.Now()
	renewed := false

	// Play the rollouts until every rotation has ended.
	waitForLong(t, "every key and CA is rotated", 20*time.Minute, func() error {
		members.roll(t)
		apis.roll(t, load)
		// The controller manager's and the scheduler's pods follow their
		// template; their Deployments, stamped with each rotation's step,
		// roll out.
		for d, template := range controllers {
			if current := templateOf(get(t, &appsv1.Deployment{}, ns, d).Spec.Template); current != template {
				rollPodsOf(t, hcp, d)
				controllers[d] = current
			} else {
				rollOutDeployment(t, ns, d)
			}
		}
		cp := get(t, &v1alpha1.HostedControlPlane{}, ns, name)
		if r := cp.Status.CertificateAuthorities.Cluster.Rotation; r != nil && r.Phase == v1alpha1.WaitingForKubelets && !renewed {
			kubeletRenews(t, workload, get(t, &corev1.Secret{}, ns, name+"-ca-next"), node)
			renewed = true
		}
		// Every rotation not ended yet is named, on one line, so that a
		// stalled one shows, whichever it is.
		var pending []string
		if st := cp.Status.CertificateAuthorities.Cluster; st.Rotation != nil || st.RotatedAt == nil {
			pending = append(pending, fmt.Sprintf("status.certificateAuthorities.cluster: %+v; %.500s; %.150s; %.150s", st.Rotation,
				conditionOf(cp, v1alpha1.ClusterCAReadyCondition), conditionOf(cp, v1alpha1.CertificatesReadyCondition), conditionOf(cp, v1alpha1.ControllersReadyCondition)))
		}
		if st := cp.Status.ServiceAccountKey; st.Rotation != nil || st.RotatedAt == nil {
			pending = append(pending, fmt.Sprintf("status.serviceAccountKey: %+v; %.500s", st.Rotation, conditionOf(cp, v1alpha1.ServiceAccountKeyReadyCondition)))
		}
		if st := cp.Status.Encryption; st.Rotation != nil || st.RotatedAt == nil {
			pending = append(pending, fmt.Sprintf("status.encryption: %+v; %.500s", st.Rotation, conditionOf(cp, v1alpha1.EncryptionReadyCondition)))
		}
		if st := cp.Status.CertificateAuthorities.Etcd; st.Rotation != nil || st.RotatedAt == nil {
			pending = append(pending, fmt.Sprintf("status.certificateAuthorities.etcd: %+v; %.500s; %.150s; %.150s", st.Rotation,
				conditionOf(cp, v1alpha1.EtcdCAReadyCondition), conditionOf(cp, v1alpha1.EtcdReadyCondition), conditionOf(cp, v1alpha1.APIServerReadyCondition)))
		}
		if st := cp.Status.CertificateAuthorities.FrontProxy; st.Rotation != nil || st.RotatedAt == nil {
			pending = append(pending, fmt.Sprintf("status.certificateAuthorities.frontProxy: %+v; %.500s; %.150s", st.Rotation,
				conditionOf(cp, v1alpha1.FrontProxyCAReadyCondition), conditionOf(cp, v1alpha1.APIServerReadyCondition)))
		}
		if len(pending) > 0 {
			return errors.New(strings.Join(pending, " | "))
		}
		return nil
	})
	t.Logf("BENCH rotation_emergency_cluster_ca_envtest_s %.1f s", time.Since(start).Seconds())
	// What the last phase renders runs everywhere.
	members.roll(t)
	apis.roll(t, load)
	// Each member restarted once, to trust the new CA alone: not to trust
	// a bundle first (the new CA is cross-signed by the old, which the
	// members kept trusting until then), nor for the certificates issued
	// again, which it loaded at its next handshakes (the controller saw it
	// present them).
	for _, m := range members.members {
		t.Logf("%s restarted %d times", m.name, m.restarts)
		assert.Equal(t, 1, m.restarts, "%s restarts once in the etcd CA's rotation", m.name)
	}
	waitCondition(t, hcp, v1alpha1.EtcdReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	ok, failures := load.stop()
	// A write etcd could not commit in time while a member restarted (its
	// leadership handed over on a loaded machine; etcd then says "request
	// timed out" or "request timed out, possibly due to previous leader
	// failure") is not the rotation's doing: no certificate, trust or
	// credential is involved. At most one in a thousand is allowed, and each
	// is listed; any other failure fails.
	timedOut := slices.DeleteFunc(slices.Clone(failures), func(f string) bool {
		return !strings.HasSuffix(f, ": etcdserver: request timed out") &&
			!strings.HasSuffix(f, ": etcdserver: request timed out, possibly due to previous leader failure")
	})
	failures = slices.DeleteFunc(failures, func(f string) bool { return slices.Contains(timedOut, f) })
	assert.Empty(t, failures, "no request failed through the phases but for etcd timeouts")
	assert.LessOrEqual(t, len(timedOut)*1000, ok, "at most one request in a thousand timed out in etcd: %v", timedOut)
	assert.Greater(t, ok, 100, "the client kept asking")
	t.Logf("%d requests, %d failed, %d timed out in etcd while a member restarted: %v", ok+len(failures)+len(timedOut), len(failures), len(timedOut), timedOut)

	for _, c := range []struct {
		title, condition string
		reasons          func() []string
	}{
		{"etcd CA", v1alpha1.EtcdCAReadyCondition, etcdReasons},
		{"front proxy CA", v1alpha1.FrontProxyCAReadyCondition, proxyReasons},
		{"cluster CA", v1alpha1.ClusterCAReadyCondition, clusterReasons},
	} {
		seen := strings.Join(c.reasons(), "\n")
		for _, phase := range []v1alpha1.RotationPhase{v1alpha1.TrustingNewCA, v1alpha1.IssuingFromNewCA, v1alpha1.DroppingOldCA} {
			assert.Contains(t, seen, string(phase)+": rotation of the "+c.title+" asked for at ", "%s named the phase", c.condition)
		}
		cond := waitCondition(t, hcp, c.condition, metav1.ConditionTrue, v1alpha1.ReadyReason)
		assert.Contains(t, cond.Message, "last rotated at")
	}
	// The rotation waited for the node's kubelet, and went on once it had
	// renewed its client certificate with the new CA.
	assert.True(t, renewed, "the rotation waited in WaitingForKubelets")
	clusterSeen := strings.Join(clusterReasons(), "\n")
	assert.Contains(t, clusterSeen, "WaitingForKubelets: rotation of the cluster CA asked for at ")
	assert.Contains(t, clusterSeen, "the kubelets of 0 of 1 nodes renewed theirs with it")
	assert.Contains(t, clusterSeen, "DroppingOldCA: rotation of the cluster CA asked for at ")
	assert.Contains(t, clusterSeen, "the kubelet of every node (1) renewed its client certificate with the new CA")

	seen := strings.Join(saReasons(), "\n")
	for _, phase := range []v1alpha1.RotationPhase{v1alpha1.TrustingNewKey, v1alpha1.SigningWithNewKey, v1alpha1.DroppingOldKey} {
		assert.Contains(t, seen, string(phase)+": rotation asked for at ", "ServiceAccountKeyReady named the phase")
	}
	final := get(t, &v1alpha1.HostedControlPlane{}, ns, name)
	assert.NotContains(t, final.Annotations, v1alpha1.RotateAnnotation, "the request was taken")
	assert.NotContains(t, final.Annotations, v1alpha1.DropOldServiceAccountKeyAnnotation, "the request to drop the old key was taken")

	// The cluster CA: <cluster>-ca holds a new root, which the kubeconfig
	// and cluster-info carry alone; a client certificate of the old CA is
	// refused; a client that trusts the old CA alone still verifies every
	// API server (the serving chain: the new key cross-signed by the old).
	newClusterCA := get(t, &corev1.Secret{}, ns, name+"-ca")
	clusterRoot := parseCert(t, newClusterCA.Data["tls.crt"])
	require.NoError(t, clusterRoot.CheckSignatureFrom(clusterRoot), "a root of its own")
	assert.NotEqual(t, oldClusterCA.Data["tls.key"], newClusterCA.Data["tls.key"])
	newKubeconfig, err := clientcmd.Load(get(t, &corev1.Secret{}, ns, name+"-kubeconfig").Data["value"])
	require.NoError(t, err)
	for _, c := range newKubeconfig.Clusters {
		assert.Equal(t, strings.TrimSpace(string(newClusterCA.Data["tls.crt"])), strings.TrimSpace(string(c.CertificateAuthorityData)),
			"<cluster>-kubeconfig carries the new cluster CA alone")
	}
	oldTrust := kubeconfigRoots(t, oldKubeconfig)
	for _, port := range ports {
		assert.Empty(t, certUser(t, port, signedClientOf(t, oldClusterCA, "mallory")), "after: a client certificate of the old cluster CA is refused")
		assert.Equal(t, "mallory", certUser(t, port, signedClientOf(t, newClusterCA, "mallory")), "one of the new CA is taken")
		assert.NoError(t, verifyServer(port, oldTrust), "a client of the old cluster CA alone verifies the API server")
	}
	workload = workloadClient(t, ns, name)
	// The workload cluster's side follows the management side's at the
	// next pass: cluster-info may still carry the new CA's certificate of
	// its rotation (the same key) for a moment.
	waitFor(t, "cluster-info carries the new cluster CA alone", func() error {
		info, err := workload.CoreV1().ConfigMaps("kube-public").Get(testContext(t), "cluster-info", metav1.GetOptions{})
		if err != nil {
			return err
		}
		infoConfig, err := clientcmd.Load([]byte(info.Data["kubeconfig"]))
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(string(infoConfig.Clusters[""].CertificateAuthorityData)); got != strings.TrimSpace(string(newClusterCA.Data["tls.crt"])) {
			return fmt.Errorf("cluster-info carries %s", got)
		}
		return nil
	})

	// The service account key: a token of the old key is refused, one asked
	// for now is of the new key.
	tokenRefused(t, workload, oldToken)
	newToken := appToken(t, workload)
	assert.Equal(t, keyID(t, get(t, &corev1.Secret{}, ns, name+"-sa").Data["tls.key"]), tokenKeyID(t, newToken))
	tokenAccepted(t, workload, newToken)

	// The encryption key: every Secret is stored under the new key.
	after := final.Status.Encryption.Key
	assert.NotEqual(t, before, after)
	hosted := members.hosted()
	assert.Zero(t, storedUnder(t, hosted, before), "no Secret is stored under the old key")
	assert.NotZero(t, storedUnder(t, hosted, after))
	for i := range 5 {
		s, err := workload.CoreV1().Secrets("app").Get(testContext(t), fmt.Sprintf("s-%d", i), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("kept-%d", i), string(s.Data["password"]))
	}

	// The etcd CA is a new root of its own; the old CA, and the cluster CA,
	// are refused.
	newEtcdCA := get(t, &corev1.Secret{}, ns, name+"-etcd")
	root := parseCert(t, newEtcdCA.Data["tls.crt"])
	assert.Equal(t, root.Subject.String(), root.Issuer.String(), "self-signed")
	require.NoError(t, root.CheckSignatureFrom(root))
	assert.NotEqual(t, oldEtcdCA.Data["tls.key"], newEtcdCA.Data["tls.key"])
	assert.Equal(t, newEtcdCA.Data["ca.crt"], get(t, &corev1.Secret{}, ns, name+"-etcd-server").Data["ca.crt"], "the members' certificate is of the new CA")
	for _, m := range members.members {
		assert.Error(t, members.dial(t, m, byOldEtcdCA), "after: a certificate of the old etcd CA is refused")
		assert.Error(t, members.dial(t, m, admin), "after: etcd no longer trusts what the cluster CA signs")
		assert.NoError(t, members.dial(t, m, signedClient(t, newEtcdCA)), "a certificate of the new CA is accepted")
	}

	// The front proxy CA too; the API servers refuse what the old one
	// signed.
	newProxyCA := get(t, &corev1.Secret{}, ns, name+"-proxy")
	proxyRoot := parseCert(t, newProxyCA.Data["tls.crt"])
	require.NoError(t, proxyRoot.CheckSignatureFrom(proxyRoot), "a root of its own")
	assert.NotEqual(t, oldProxyCA.Data["tls.key"], newProxyCA.Data["tls.key"])
	for _, port := range ports {
		assert.NotEqual(t, "alice", proxiedUser(t, port, byOldProxyCA), "after: the front proxy's certificate of the old CA is refused")
		assert.Equal(t, "alice", proxiedUser(t, port, signedClientOf(t, newProxyCA, "front-proxy-client")), "one of the new CA is taken")
	}
	cm, err := workload.CoreV1().ConfigMaps("kube-system").Get(testContext(t), "extension-apiserver-authentication", metav1.GetOptions{})
	require.NoError(t, err)
	// The API servers add their CA to what the ConfigMap holds, and drop
	// only expired ones: the old CA stays there (see the README).
	assert.Contains(t, cm.Data["requestheader-client-ca-file"], strings.TrimSpace(string(newProxyCA.Data["ca.crt"])),
		"extension API servers are told to trust the new CA")

	waitFor(t, "the new CAs' own Secrets, Certificates and Issuers, the etcd CA's cross-signed copy and the front proxy's trust bundle are removed", func() error {
		for _, o := range []struct {
			obj  client.Object
			name string
		}{
			{&corev1.Secret{}, name + "-etcd-next"},
			{&cmv1.Certificate{}, name + "-etcd-next"},
			{&cmv1.Issuer{}, name + "-etcd-next"},
			{&corev1.Secret{}, name + "-etcd-cross"},
			{&cmv1.Issuer{}, name + "-etcd-cross"},
			{&corev1.Secret{}, name + "-proxy-next"},
			{&cmv1.Certificate{}, name + "-proxy-next"},
			{&cmv1.Issuer{}, name + "-proxy-next"},
			{&corev1.Secret{}, name + "-proxy-trust"},
		} {
			if err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: o.name}, o.obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s: %w", o.obj, o.name, err)
			}
		}
		return nil
	})
	// etcd's members and the API servers keep reading the etcd CA's trust
	// Secret, which holds the new CA alone.
	assert.True(t, get(t, &v1alpha1.HostedControlPlane{}, ns, name).Status.CertificateAuthorities.Etcd.TrustSecret)
	assert.Equal(t, string(newEtcdCA.Data["ca.crt"]), string(get(t, &corev1.Secret{}, ns, name+"-etcd-trust").Data["ca.crt"]))
}

// etcdMember is a member of a real etcd cluster run as a StatefulSet's pod:
// its pod's name and address, and the template it was started with.
type etcdMember struct {
	name, podIP          string
	clientPort, peerPort int
	dataDir              string
	proc                 *Process
	// started is the StatefulSet's pod template the member was started
	// with, and template its digest: its pod shows that one, not a newer
	// one the StatefulSet got while it started.
	started  *corev1.PodTemplateSpec
	template string
	// mounts are the directories of its Secrets' files, by Secret, and
	// written the digest of what each holds (see refresh).
	mounts, written map[string]string
	// restarts counts the restarts roll made.
	restarts int
}

// etcdMembers run the members of a control plane's etcd on 127.0.0.1 (their
// certificates name it), each also listening at its pod's address on etcd's
// client port, where the controller reaches it.
type etcdMembers struct {
	ns, cluster string
	members     []*etcdMember
}

func runEtcdMembers(t *testing.T, hcp *v1alpha1.HostedControlPlane, n int) *etcdMembers {
	t.Helper()
	e := &etcdMembers{ns: hcp.Namespace, cluster: hcp.Name}
	net := fmt.Sprintf("127.%d.%d", 1+time.Now().UnixNano()%250, 1+os.Getpid()%250)
	for i := range n {
		e.members = append(e.members, &etcdMember{
			name: fmt.Sprintf("%s-etcd-%d", hcp.Name, i), podIP: fmt.Sprintf("%s.%d", net, 10+i),
			clientPort: freePort(t), peerPort: freePort(t), dataDir: filepath.Join(t.TempDir(), "data"),
		})
	}
	for _, m := range e.members {
		e.start(t, m, "new")
	}
	for _, m := range e.members {
		e.waitHealthy(t, m)
		e.runPod(t, m)
	}
	rollOutStatefulSet(t, hcp.Namespace, hcp.Name+"-etcd")
	t.Cleanup(func() {
		for _, m := range e.members {
			_ = m.proc.Stop(10 * time.Second)
		}
	})
	return e
}

// hosted is what the API servers are started against.
func (e *etcdMembers) hosted() *hostedEtcd {
	h := &hostedEtcd{ns: e.ns, cluster: e.cluster}
	for _, m := range e.members {
		h.endpoints = append(h.endpoints, fmt.Sprintf("https://127.0.0.1:%d", m.clientPort))
	}
	return h
}

// templateOf identifies a pod template: its arguments and what its Secrets
// held.
func templateOf(spec corev1.PodTemplateSpec) string {
	return spec.Annotations["controlplane.cluster.x-k8s.io/secrets-hash"] + " " + strings.Join(spec.Spec.Containers[0].Args, " ")
}

// start runs m with the StatefulSet's current template, its Secrets written
// as the kubelet mounts them, and its addresses as this machine has them.
func (e *etcdMembers) start(t *testing.T, m *etcdMember, state string) {
	t.Helper()
	sts := get(t, &appsv1.StatefulSet{}, e.ns, e.cluster+"-etcd")
	var cluster []string
	for _, peer := range e.members {
		cluster = append(cluster, fmt.Sprintf("%s=https://127.0.0.1:%d", peer.name, peer.peerPort))
	}
	dir := t.TempDir()
	args := mountInto(t, e.ns, dir, sts.Spec.Template.Spec.Volumes, sts.Spec.Template.Spec.Containers[0])
	m.mounts, m.written = secretMounts(dir, sts.Spec.Template.Spec.Volumes, sts.Spec.Template.Spec.Containers[0]), map[string]string{}
	args = slices.DeleteFunc(args, func(a string) bool {
		return slices.ContainsFunc([]string{
			"name", "data-dir", "listen-client-urls", "advertise-client-urls", "listen-peer-urls",
			"initial-advertise-peer-urls", "listen-metrics-urls",
		}, func(flag string) bool { return strings.HasPrefix(a, "--"+flag+"=") })
	})
	args = append(args, "--name="+m.name, "--data-dir="+m.dataDir,
		fmt.Sprintf("--listen-client-urls=https://127.0.0.1:%d,https://%s:%d", m.clientPort, m.podIP, contract.EtcdClientPort),
		fmt.Sprintf("--advertise-client-urls=https://127.0.0.1:%d", m.clientPort),
		// The controller verifies what it presents on its peer port too.
		fmt.Sprintf("--listen-peer-urls=https://127.0.0.1:%d,https://%s:2380", m.peerPort, m.podIP),
		fmt.Sprintf("--initial-advertise-peer-urls=https://127.0.0.1:%d", m.peerPort),
		"--listen-metrics-urls=http://127.0.0.1:0",
		"--initial-cluster="+strings.Join(cluster, ","), "--initial-cluster-state="+state)
	proc, err := StartProcess(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "etcd"), nil, args...)
	require.NoError(t, err)
	m.proc, m.started, m.template = proc, sts.Spec.Template.DeepCopy(), templateOf(sts.Spec.Template)
}

// waitHealthy waits until m answers its health key with the health-check
// client certificate (and the trust bundle while there is one), as the
// controller asks.
func (e *etcdMembers) waitHealthy(t *testing.T, m *etcdMember) {
	t.Helper()
	waitFor(t, m.name+" answers", func() error {
		if exited, err := m.proc.Exited(); exited {
			return fmt.Errorf("etcd exited (%w):\n%s", err, tail(m.proc.Output()))
		}
		return e.dial(t, m, e.controllerCredentials(t))
	})
}

// controllerCredentials are the controller's: the health-check client
// certificate, verifying the members with the trust bundle while a
// rotation has one.
func (e *etcdMembers) controllerCredentials(t *testing.T) *tls.Config {
	t.Helper()
	secret := get(t, &corev1.Secret{}, e.ns, contract.EtcdHealthcheckSecretName(e.cluster))
	cert, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(secret.Data["ca.crt"])
	trust := &corev1.Secret{}
	if env.Client.Get(testContext(t), client.ObjectKey{Namespace: e.ns, Name: contract.EtcdTrustSecretName(e.cluster)}, trust) == nil {
		roots.AppendCertsFromPEM(trust.Data["ca.crt"])
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12}
}

// dial reads a key from m with cfg's client certificate; nil when etcd
// answered. The member is verified with cfg's roots, or, when it has none,
// not at all (the question is whether the member accepts the client).
func (e *etcdMembers) dial(t *testing.T, m *etcdMember, cfg *tls.Config) error {
	t.Helper()
	cfg = cfg.Clone()
	cfg.ServerName = contract.EtcdServerName(e.cluster, e.ns)
	if cfg.RootCAs == nil {
		cfg.InsecureSkipVerify = true //nolint:gosec // the member's certificate is not what is tested
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{fmt.Sprintf("https://127.0.0.1:%d", m.clientPort)}, DialTimeout: 3 * time.Second, TLS: cfg,
		Logger: zap.NewNop(),
	})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(testContext(t), 3*time.Second)
	defer cancel()
	_, err = c.Get(ctx, "health")
	return err
}

// runPod replaces m's pod with one of the template m was started with,
// running at m's address and ready, as the StatefulSet controller and the
// kubelet would.
func (e *etcdMembers) runPod(t *testing.T, m *etcdMember) {
	t.Helper()
	ctx := testContext(t)
	sts := get(t, &appsv1.StatefulSet{}, e.ns, e.cluster+"-etcd")
	old := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: m.name}, old); err == nil {
		require.NoError(t, env.Client.Delete(ctx, old, client.GracePeriodSeconds(0)))
		waitFor(t, m.name+" deleted", func() error {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: m.name}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %w", err)
			}
			return nil
		})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: m.name, Labels: m.started.Labels, Annotations: m.started.Annotations},
		Spec:       *m.started.Spec.DeepCopy(),
	}
	// The StatefulSet controller adds the volumes of its claims.
	for _, claim := range sts.Spec.VolumeClaimTemplates {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: claim.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name + "-" + m.name},
		}})
	}
	require.NoError(t, env.Client.Create(ctx, pod))
	setStatus(t, pod, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP, p.Status.PodIPs = m.podIP, []corev1.PodIP{{IP: m.podIP}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	})
}

// roll restarts, one at a time, each member whose template changed, each
// only once the one before answers, and reports the rollout. The files of
// a member that keeps running follow its Secrets, as the kubelet writes
// them (refresh).
func (e *etcdMembers) roll(t *testing.T) {
	t.Helper()
	for _, m := range e.members {
		sts := get(t, &appsv1.StatefulSet{}, e.ns, e.cluster+"-etcd")
		if templateOf(sts.Spec.Template) == m.template {
			e.refresh(t, m)
			continue
		}
		m.restarts++
		t.Logf("%s: %s restarts", time.Now().UTC().Format(time.RFC3339Nano), m.name)
		_ = m.proc.Stop(20 * time.Second) // etcd ends on SIGTERM by the signal
		e.start(t, m, "existing")
		e.waitHealthy(t, m)
		t.Logf("%s: %s answers", time.Now().UTC().Format(time.RFC3339Nano), m.name)
		e.runPod(t, m)
	}
	rollOutStatefulSet(t, e.ns, e.cluster+"-etcd")
}

// refresh writes again the files of each Secret a running member mounts
// whose data changed since they were written, as the kubelet updates a
// running pod's Secret volumes (the first time, they are written again
// unchanged).
func (e *etcdMembers) refresh(t *testing.T, m *etcdMember) {
	t.Helper()
	for dir, name := range m.mounts {
		secret := get(t, &corev1.Secret{}, e.ns, name)
		if digest := contract.DataDigest(secret.Data); digest != m.written[dir] {
			require.NoError(t, writeSecretData(secret.Data, dir))
			m.written[dir] = digest
		}
	}
}

// apiServers are the API servers of a control plane, each on its port.
type apiServers struct {
	etcd     *hostedEtcd
	ports    []int
	procs    []*Process
	template string
}

func newAPIServers(t *testing.T, etcd *hostedEtcd, ports []int) *apiServers {
	t.Helper()
	a := &apiServers{etcd: etcd, ports: ports}
	d := get(t, &appsv1.Deployment{}, etcd.ns, etcd.cluster+"-apiserver")
	for _, port := range ports {
		p, _ := etcd.startAPIServerOf(t, t.TempDir(), d, port, withoutShutdownDelay)
		a.procs = append(a.procs, p)
	}
	a.template = templateOf(d.Spec.Template)
	return a
}

// withoutShutdownDelay leaves out the API servers' shutdown delay, which
// keeps a terminating one serving while its endpoint leaves the Service:
// here the load stops sending it requests before it is stopped.
func withoutShutdownDelay(arg string) bool {
	return strings.HasPrefix(arg, "--shutdown-delay-duration=")
}

// roll restarts the API servers one at a time when their template changed:
// each is taken out of the load's service first (its requests drained), and
// put back once it answers.
func (a *apiServers) roll(t *testing.T, l *load) {
	t.Helper()
	d := get(t, &appsv1.Deployment{}, a.etcd.ns, a.etcd.cluster+"-apiserver")
	if templateOf(d.Spec.Template) == a.template {
		rollOutDeployment(t, a.etcd.ns, a.etcd.cluster+"-apiserver")
		return
	}
	for i, port := range a.ports {
		l.out(port)
		require.NoError(t, a.procs[i].Stop(20*time.Second))
		a.procs[i], _ = a.etcd.startAPIServerOf(t, t.TempDir(), d, port, withoutShutdownDelay)
		l.waitAnswers(t, port)
		l.in(port)
	}
	// The pods show the template the API servers run, though the
	// Deployment may have another by now: the next roll starts that one.
	a.template = templateOf(d.Spec.Template)
	runPodsOf(t, d)
}

// load reads and writes through the API servers in service, one request
// after another, round robin, and counts what failed.
type load struct {
	mu       sync.Mutex
	gates    map[int]*sync.RWMutex
	serving  map[int]bool
	clients  map[int]kubernetes.Interface
	ok       int
	failures []string
	cancel   context.CancelFunc
	done     chan struct{}
}

func startLoad(t *testing.T, ns, cluster string, ports []int) *load {
	t.Helper()
	kubeconfig := get(t, &corev1.Secret{}, ns, cluster+"-kubeconfig")
	l := &load{gates: map[int]*sync.RWMutex{}, serving: map[int]bool{}, clients: map[int]kubernetes.Interface{}, done: make(chan struct{})}
	// It trusts the cluster CA of the kubeconfig as it was at the start,
	// and presents the client certificate the kubeconfig holds when it
	// connects, as a user who took the CA once and follows the credentials.
	tlsConfig := &tls.Config{
		RootCAs: kubeconfigRoots(t, kubeconfig), MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return latestAdmin(ns, cluster)
		},
	}
	for _, port := range ports {
		cfg := &rest.Config{
			Host: fmt.Sprintf("https://127.0.0.1:%d", port), QPS: 100, Burst: 100,
			Transport: &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true},
		}
		l.clients[port] = kubernetes.NewForConfigOrDie(cfg)
		l.gates[port], l.serving[port] = &sync.RWMutex{}, true
	}
	// Not testContext's: the load runs longer than its two minutes.
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	// An API server just started may not finish a TLS handshake in time on
	// a busy machine: the load starts once each answers.
	for _, port := range ports {
		l.waitAnswers(t, port)
	}
	_, err := l.clients[ports[0]].CoreV1().Namespaces().Create(testContext(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "load"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = l.clients[ports[0]].CoreV1().ConfigMaps("load").Create(testContext(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "load"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	go func() {
		defer close(l.done)
		for i := 0; ctx.Err() == nil; i++ {
			port := ports[i%len(ports)]
			l.request(ctx, port, i)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { l.stop() })
	return l
}

// request reads and writes through the API server on port, unless it is
// out of service.
func (l *load) request(ctx context.Context, port, i int) {
	l.mu.Lock()
	serving, gate := l.serving[port], l.gates[port]
	l.mu.Unlock()
	if !serving || !gate.TryRLock() {
		return
	}
	defer gate.RUnlock()
	c := l.clients[port]
	cm, err := c.CoreV1().ConfigMaps("load").Get(ctx, "load", metav1.GetOptions{})
	if err == nil {
		cm.Data = map[string]string{"n": fmt.Sprint(i)}
		_, err = c.CoreV1().ConfigMaps("load").Update(ctx, cm, metav1.UpdateOptions{})
	}
	if apierrors.IsConflict(err) {
		err = nil // another API server wrote in between: an answer
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.ok++
	case ctx.Err() == nil:
		l.failures = append(l.failures, fmt.Sprintf("%s via :%d: %v", time.Now().Format(time.RFC3339Nano), port, err))
	}
}

// out takes the API server on port out of service once its requests are
// done.
func (l *load) out(port int) {
	l.mu.Lock()
	l.serving[port] = false
	gate := l.gates[port]
	l.mu.Unlock()
	gate.Lock()
	gate.Unlock() //nolint:staticcheck // drains the requests in flight
}

func (l *load) in(port int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.serving[port] = true
}

// waitAnswers waits until the API server on port is ready.
func (l *load) waitAnswers(t *testing.T, port int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the API server on :%d is ready", port), func() error {
		_, err := l.clients[port].Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(testContext(t))
		return err
	})
}

// stop ends the load and returns the requests that succeeded and the
// failures.
func (l *load) stop() (int, []string) {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok, slices.Clone(l.failures)
}

// kubeletRenews plays what the kubelet of node and the controller manager
// do when the kubelet renews its client certificate: a request of the
// kubelet client signer for system:node:<node>, approved, and a certificate
// the CA in secret signs for it.
func kubeletRenews(t *testing.T, workload kubernetes.Interface, secret *corev1.Secret, node string) {
	t.Helper()
	ctx := testContext(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	subject := pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}
	request, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	require.NoError(t, err)
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "node-csr-" + node},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: request}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
	csrs := workload.CertificatesV1().CertificateSigningRequests()
	answered(t, func() (err error) {
		csr, err = csrs.Create(ctx, csr, metav1.CreateOptions{})
		return err
	})
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved", Message: "renewal of a node's own certificate",
	})
	answered(t, func() (err error) {
		csr, err = csrs.UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
		return err
	})
	ca := parseCA(t, secret)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject,
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca.Cert, key.Public(), ca.Key)
	require.NoError(t, err)
	csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	answered(t, func() error {
		_, err := csrs.UpdateStatus(ctx, csr, metav1.UpdateOptions{})
		return err
	})
}

// signedClient is a client certificate the CA in secret signs, presented
// with the CA's certificate as its chain, without roots (the member's
// certificate is not verified).
func signedClient(t *testing.T, secret *corev1.Secret) *tls.Config {
	t.Helper()
	return signedClientOf(t, secret, "intruder")
}

// signedClientOf is signedClient with commonName as its subject.
func signedClientOf(t *testing.T, secret *corev1.Secret, commonName string) *tls.Config {
	t.Helper()
	ca := parseCA(t, secret)
	leaf, err := ca.Issue(commonName, nil)
	require.NoError(t, err)
	return &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate(ca)}, MinVersion: tls.VersionTLS12}
}

// parseCA is the CA (tls.crt and tls.key) secret holds.
func parseCA(t *testing.T, secret *corev1.Secret) *pkitest.KeyPair {
	t.Helper()
	ca, err := pkitest.Parse(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	require.NoError(t, err)
	return ca
}

// adminCredentials are the admin client certificate of <cluster>-kubeconfig,
// which the cluster CA signs.
func adminCredentials(t *testing.T, ns, cluster string) *tls.Config {
	t.Helper()
	kubeconfig := get(t, &corev1.Secret{}, ns, cluster+"-kubeconfig")
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig.Data["value"])
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	require.NoError(t, err)
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

func tail(s string) string {
	if len(s) > 3000 {
		return s[len(s)-3000:]
	}
	return s
}

// waitForLong polls check every half second for up to timeout.
func waitForLong(t *testing.T, what string, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	last := ""
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		// Each new state is logged once, so a run that stalls shows
		// where, however its output is cut.
		if err.Error() != last {
			last = err.Error()
			t.Logf("%s: not yet: %v", what, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s: still not so after %s: %v", what, timeout, err)
}

// proxiedUser is who the API server on port takes a request for, that
// comes with cfg's client certificate as the front proxy's and names alice
// in X-Remote-User; empty when it refuses the request.
func proxiedUser(t *testing.T, port int, cfg *tls.Config) string {
	t.Helper()
	return reviewedUser(t, port, cfg, map[string]string{"X-Remote-User": "alice", "X-Remote-Group": "system:authenticated"})
}

// reviewedUser is who the API server on port takes a SelfSubjectReview
// with cfg's client certificate and header for; empty when it refuses it.
func reviewedUser(t *testing.T, port int, cfg *tls.Config, header map[string]string) string {
	t.Helper()
	body := strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost,
		fmt.Sprintf("https://127.0.0.1:%d/apis/authentication.k8s.io/v1/selfsubjectreviews", port), body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := proxiedClient(cfg).Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusCreated {
		msg, _ := io.ReadAll(resp.Body)
		t.Logf("the API server on :%d refused the request: %s %.300s", port, resp.Status, msg)
		return ""
	}
	review := &authenticationv1.SelfSubjectReview{}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(review))
	return review.Status.UserInfo.Username
}

func proxiedClient(cfg *tls.Config) *http.Client {
	cfg = cfg.Clone()
	cfg.InsecureSkipVerify = true //nolint:gosec // the API server's certificate is not what is tested
	cfg.RootCAs = x509.NewCertPool()
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// kubeconfigRoots are the CAs the kubeconfig in secret trusts.
func kubeconfigRoots(t *testing.T, secret *corev1.Secret) *x509.CertPool {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(cfg.CAData))
	return roots
}

// latestAdmin is the admin client certificate <cluster>-kubeconfig holds now.
func latestAdmin(ns, cluster string) (*tls.Certificate, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster + "-kubeconfig"}, secret); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	return &cert, err
}

// certUser is who the API server on port takes a request with cfg's client
// certificate for; empty when it refuses it.
func certUser(t *testing.T, port int, cfg *tls.Config) string {
	t.Helper()
	return reviewedUser(t, port, cfg, nil)
}

// verifyServer completes a TLS handshake with the API server on port,
// verifying it with roots alone, as a kubelet that joined with them does.
func verifyServer(port int, roots *x509.CertPool) error {
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	return conn.Close()
}
