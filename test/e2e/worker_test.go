package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/test/slots"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/local"
)

// workerPodCIDR is the worker's share of hostedCluster's pod network
// (192.168.0.0/16).
const workerPodCIDR = "192.168.1.0/24"

// workerCluster is hostedCluster with one API server and etcdMembers etcd
// members, whose kube-proxy runs without its configuration file so that
// --conntrack-max-per-core=0 applies. kube-proxy otherwise sets
// nf_conntrack_max, which is read-only outside the host's first network
// namespace, where the worker's kube-proxy runs (a real machine's would
// not); with --config, kube-proxy ignores the other flags. The remaining
// flags are what the controller's configuration file says.
func workerCluster(name string, etcdMembers int) string {
	// The HostedControlPlane's spec ends the stream, so more of its
	// fields can be appended.
	return hostedCluster(name, images.KubeVersion, 1, etcdMembers) + `  kubeProxy:
    args:
      config: ""
      kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
      cluster-cidr: 192.168.0.0/16
      conntrack-max-per-core: "0"
`
}

// A real worker joins a hosted cluster with kubeadm join and a bootstrap
// token: its client certificate comes from an auto-approved CSR, the node
// turns Ready once its CNI is configured, kube-proxy, CoreDNS and the
// konnectivity agent run on it, a pod on it resolves the kubernetes
// Service and reaches the API server through it with its service account
// token, and kubectl logs and exec reach that pod through the hosted API
// server (via konnectivity). Every leaf certificate is renewed, the service
// account key rotated, the cluster CA rotated (the worker keeps its old
// trust and is never joined again; a new worker joins after), and the etcd
// and front proxy CAs rotated again, each alone, each step with clients
// counting failures. Then the worker and the Cluster are deleted.
func TestWorkerJoins(t *testing.T) {
	parallel(t)
	workerJoins(t, "worker", "joined", loadBalancerAddress)
}

// The same through the shared Gateway: the worker joins through the
// gateway hostname, its konnectivity agent connects through the Gateway,
// and the kubernetes Service leads through the tunnel on the node. Every
// leaf is renewed; restored in place from a snapshot, etcd takes the
// kubelet's writes again (through the Gateway) and exec reaches the pod
// again.
func TestWorkerJoinsThroughGateway(t *testing.T) {
	parallel(t, slots.Uses(sharedGateway))
	workerJoins(t, "gwworker", "gwjoined", throughGateway)
}

// The same behind a load balancer that reports a hostname and no address,
// as AWS's do (the local cluster's LoadBalancerHostnamesLabel): the worker
// joins through that name, and the kubernetes Service leads through the
// tunnel on the node, which dials the name as the node resolves it. Up to
// the pod that reaches the API server through the Service and kubectl logs
// through konnectivity; the rotations, which do not depend on the
// exposure, are TestWorkerJoins', and the restore TestWorkerJoinsThroughGateway's.
func TestWorkerJoinsBehindALoadBalancerName(t *testing.T) {
	parallel(t)
	workerJoins(t, "lbworker", "lbjoined", loadBalancerName)
}

// workerExposure is how a worker test's control plane is served.
type workerExposure int

const (
	// loadBalancerAddress is a LoadBalancer Service that reports an
	// address, which the kubernetes EndpointSlice holds.
	loadBalancerAddress workerExposure = iota
	// loadBalancerName is a LoadBalancer Service that reports a hostname
	// only, which the tunnel on each node dials.
	loadBalancerName
	// throughGateway is the shared Gateway capi, which the tunnel on each
	// node reaches under the tunnel's SNI.
	throughGateway
)

// workerJoins runs the worker test on a cluster served as exposure says.
func workerJoins(t *testing.T, nsName, name string, exposure workerExposure) {
	gateway, tunnel := exposure == throughGateway, exposure != loadBalancerAddress
	// Each on a link and a pod network of its own: they run beside each
	// other.
	spec := workerSpec{name: "worker-1", podCIDR: workerPodCIDR}
	switch exposure {
	case loadBalancerName:
		spec = workerSpec{name: "worker-lb", index: 1, podCIDR: "192.168.2.0/24"}
	case throughGateway:
		spec = workerSpec{name: "worker-gw", index: 5, podCIDR: "192.168.5.0/24"}
	}
	nodeName := spec.name
	ns := namespace(t, nsName)
	// The rotations in TestWorkerJoins restart etcd's members one at a
	// time: three keep a quorum while one restarts.
	etcdMembers := 1
	if exposure == loadBalancerAddress {
		etcdMembers = 3
	}
	manifest := workerCluster(name, etcdMembers)
	switch exposure {
	case throughGateway:
		manifest += "  gateway: {name: capi, namespace: capi-system}\n"
	case loadBalancerName:
		nsObj := &corev1.Namespace{}
		require.NoError(t, k8s.Get(testContext(t), client.ObjectKey{Name: ns}, nsObj))
		nsObj.Labels[cluster.LoadBalancerHostnamesLabel] = "true"
		require.NoError(t, k8s.Update(testContext(t), nsObj))
	case loadBalancerAddress:
		// Kubelet client certificates short enough to be renewed during
		// the rotation of the cluster CA.
		manifest += fmt.Sprintf("  deployment:\n    controllerManager:\n      args: {cluster-signing-duration: %s}\n", workerSigningDuration)
	}
	apply(t, ns, manifest)
	key := client.ObjectKey{Namespace: ns, Name: name}
	require.NoError(t, local.WaitAvailable(testContext(t), k8s, key, 15*time.Minute))
	if exposure == loadBalancerName {
		loadBalancerNamed(t, key)
	}

	// Cluster API's ClusterCache, through which the controller keeps the
	// join objects and add-ons in the workload cluster, connects only
	// once the Cluster's infrastructure is provisioned. Cluster API
	// v1.14.2 marks a Cluster without infrastructureRef provisioned itself
	// (core/reconcilers/cluster reconcileInfrastructure), so the test sets
	// nothing.
	eventually(t, 2*time.Minute, "Cluster API marks the Cluster's infrastructure provisioned", func() error {
		c := &clusterv1.Cluster{}
		if err := k8s.Get(testContext(t), key, c); err != nil {
			return err
		}
		if !ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false) {
			return fmt.Errorf("status.initialization.infrastructureProvisioned is not true")
		}
		return nil
	})

	cfg := hostedConfig(t, ns, name)
	if gateway {
		// kubectl exec's WebSocket and SPDY dialers resolve through the
		// host's resolver, not the configuration's dialer: the host learns
		// the gateway hostname the way the quickstart tells a user to.
		require.NoError(t, local.AddHosts(local.HostsFile, cluster.GatewayAddress, gatewayHost(ns, name)))
		t.Cleanup(func() { assert.NoError(t, local.RemoveHosts(local.HostsFile)) })
	}
	hosted, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	hostedClient, err := client.New(cfg, client.Options{Scheme: cluster.Scheme()})
	require.NoError(t, err)

	token := bootstrapToken(t, hostedClient, hosted)
	tokenID := strings.SplitN(token, ".", 2)[0]
	worker := startWorker(t, ns, name, spec, token, tunnel)
	stop := sync.OnceValue(worker.Stop)
	t.Cleanup(func() { assert.NoError(t, stop(), "stop the worker") })
	t.Cleanup(func() {
		if t.Failed() {
			dumpWorker(t, worker, hosted)
		}
	})
	ctx := testContext(t)

	require.True(t, t.Run("the node registers with a certificate from an auto-approved CSR", func(t *testing.T) {
		// kubeadm join ends once the kubelet has its certificate; the
		// kubelet registers its Node right after.
		eventually(t, time.Minute, "node "+nodeName+" registered", func() error {
			_, err := hosted.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			return err
		})
		csrs, err := hosted.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var found *certificatesv1.CertificateSigningRequest
		for i, csr := range csrs.Items {
			if csr.Spec.Username == "system:bootstrap:"+tokenID && csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName {
				found = &csrs.Items[i]
			}
		}
		require.NotNil(t, found, "a kubelet client CSR of the bootstrap token %s among %d CSRs", tokenID, len(csrs.Items))
		approved := false
		for _, c := range found.Status.Conditions {
			approved = approved || (c.Type == certificatesv1.CertificateApproved && c.Status == corev1.ConditionTrue)
		}
		assert.True(t, approved, "CSR %s approved: %+v", found.Name, found.Status.Conditions)
		assert.NotEmpty(t, found.Status.Certificate, "CSR %s issued", found.Name)
		assert.Contains(t, found.Spec.Groups, cluster.NodeBootstrapGroup)
	}), "later steps need this one")

	require.True(t, t.Run("the node turns Ready once its CNI is configured", func(t *testing.T) {
		ready := nodeReady(ctx, hosted, nodeName)
		eventually(t, time.Minute, "node "+nodeName+" is not Ready for want of a network", func() error {
			err := ready()
			if err == nil {
				return errors.New("Ready without a CNI configuration")
			}
			if !strings.Contains(err.Error(), "cni plugin not initialized") {
				return fmt.Errorf("not Ready, but not for its network: %w", err)
			}
			return nil
		})
		require.NoError(t, worker.ConfigureCNI())
		eventually(t, 5*time.Minute, "node "+nodeName+" Ready", ready)
	}), "later steps need this one")

	require.True(t, t.Run("kube-proxy, CoreDNS and the konnectivity agent run on the node", func(t *testing.T) {
		selectors := []string{"k8s-app=kube-proxy", "k8s-app=kube-dns", "k8s-app=konnectivity-agent"}
		if tunnel {
			// The tunnel first: CoreDNS needs the kubernetes Service.
			selectors = append([]string{"k8s-app=kas-tunnel"}, selectors...)
		}
		for _, selector := range selectors {
			eventually(t, 5*time.Minute, selector+" ready on "+nodeName, func() error {
				return readyPodOn(ctx, hosted, "kube-system", selector, nodeName)
			})
		}
	}), "later steps need this one")

	t.Run("a pod on the node resolves the kubernetes Service and reaches the API server through it", func(t *testing.T) {
		if tunnel {
			slice, err := hosted.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, []string{contract.NodeLocalAddress}, slice.Endpoints[0].Addresses, "the Service leads to the tunnel on each node")
		}
		// The default service account may list the pods of its namespace.
		_, err := hosted.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "probe-view"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: "default"}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		createProbe(t, hosted, nodeName, "probe", "--url=https://kubernetes.default.svc/version", "--url=https://kubernetes.default.svc/api/v1/namespaces/default/pods")
		svc, err := hosted.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		require.NoError(t, err)
		var logs string
		eventually(t, 3*time.Minute, "the probe's checks pass (kubectl logs through konnectivity)", func() error {
			b, err := hosted.CoreV1().Pods("default").GetLogs("probe", &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				return fmt.Errorf("logs: %w", err)
			}
			logs = string(b)
			if !strings.Contains(logs, "probe: all checks passed") {
				return fmt.Errorf("not yet; the log so far:\n%s", logs)
			}
			return nil
		})
		t.Logf("probe log:\n%s", logs)
		assert.Contains(t, logs, "resolved kubernetes.default.svc.cluster.local: "+svc.Spec.ClusterIP)
		assert.Regexp(t, `GET https://kubernetes.default.svc/version: 200 .*"gitVersion": ?"`+images.KubeVersion+`"`, logs)
		assert.Contains(t, logs, `GET https://kubernetes.default.svc/api/v1/namespaces/default/pods: 200 {"kind":"PodList"`,
			"the service account token authenticates and RBAC allows the list")
		if tunnel {
			c := waitCondition(t, key, v1alpha1.KubernetesServiceReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
			assert.Contains(t, c.Message, "DaemonSet kube-system/kas-tunnel carries it")
		}
	})

	t.Run("the management cluster cannot reach the worker's kubelet directly", func(t *testing.T) {
		// So logs and exec can only have come through konnectivity.
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(worker.NodeIP, "10250"), 3*time.Second)
		if err == nil {
			_ = conn.Close()
		}
		require.Error(t, err, "the worker accepts no connection from outside")
	})

	if exposure != loadBalancerName {
		// kubectl exec's dialers resolve through the host's resolver,
		// which does not know the load balancer's name.
		t.Run("kubectl exec reaches the pod through konnectivity", func(t *testing.T) {
			stdout, stderr, err := execIn(ctx, cfg, hosted, "probe", "/probe", "--version")
			require.NoError(t, err, "exec: stderr %q", stderr)
			assert.Equal(t, "probe dev", strings.TrimSpace(stdout))
		})

		t.Run("every leaf certificate renewed with no failed request", func(t *testing.T) {
			leavesRenewedWithoutFailures(t, cfg, hosted, key, nodeName)
		})
	}

	if exposure == loadBalancerAddress {
		t.Run("the service account key rotated with no failed request", func(t *testing.T) {
			serviceAccountKeyRotatedWithoutFailures(t, cfg, hosted, key, nodeName)
		})
		t.Run("the cluster CA rotated with the worker joined, and a new worker joins after", func(t *testing.T) {
			clusterCARotatedWithWorker(t, key, nodeName)
		})
		// The admin certificate the test took at the start is of the old
		// cluster CA, refused now: take the kubeconfig again, as a user
		// does.
		cfg = hostedConfig(t, ns, name)
		hosted, err = kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		t.Run("the etcd CA rotated alone with no failed request", func(t *testing.T) {
			authorityRotatedAloneWithWorker(t, cfg, hosted, key, nodeName, etcdCA)
		})
		t.Run("the front proxy CA rotated alone with no failed request", func(t *testing.T) {
			authorityRotatedAloneWithWorker(t, cfg, hosted, key, nodeName, frontProxyCA)
		})
	}
	if exposure == throughGateway {
		// Here rather than after the rotations above, the suite's longest
		// run of steps, which it would lengthen by minutes. The store
		// outlives the subtest: deleting the Cluster takes a final
		// snapshot.
		store := startBackupStore(t, ns+"-backups")
		store.grant(t, ns)
		t.Run("restored in place, the node and its pod carry on", func(t *testing.T) {
			workerCarriesOnAfterRestore(t, store, cfg, hosted, key, nodeName)
		})
	}

	t.Run("the worker and the Cluster are deleted", func(t *testing.T) {
		require.NoError(t, stop())
		_, err := os.Stat(worker.Dir)
		assert.True(t, os.IsNotExist(err), "the worker's directory is removed: %v", err)
		_, err = os.Stat("/run/netns/hcpw-" + nodeName)
		assert.True(t, os.IsNotExist(err), "the worker's network namespace is removed: %v", err)
		deleteClusters(t, key)
	})
}

// loadBalancerNamed checks that the control plane of key is served behind
// a load balancer that reports only a hostname: its Service's status holds
// that name and no address, the name resolves, through the DNS the host and
// the workers ask, to the address the load balancer serves, the endpoint and
// the kubeconfig name it, and the workload cluster's tunnel dials it
// directly.
func loadBalancerNamed(t *testing.T, key client.ObjectKey) {
	t.Helper()
	ctx := testContext(t)
	svc := &corev1.Service{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name + "-apiserver"}, svc))
	require.Len(t, svc.Status.LoadBalancer.Ingress, 1, "the load balancer's ingress")
	ingress := svc.Status.LoadBalancer.Ingress[0]
	assert.Empty(t, ingress.IP, "no address")
	require.True(t, strings.HasSuffix(ingress.Hostname, "."+cluster.LoadBalancerDomain), "a hostname: %+v", ingress)
	lb := &corev1.Service{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name + "-apiserver-lb"}, lb))
	require.NotEmpty(t, lb.Status.LoadBalancer.Ingress, "the load balancer has an address")
	addrs, err := cluster.Resolver.LookupHost(ctx, ingress.Hostname)
	require.NoError(t, err)
	assert.Equal(t, []string{lb.Status.LoadBalancer.Ingress[0].IP}, addrs, "%s resolves to the load balancer's address", ingress.Hostname)

	hcp := controlPlaneOf(t, key.Namespace, key.Name)
	assert.Equal(t, ingress.Hostname, hcp.Spec.ControlPlaneEndpoint.Host, "the endpoint is the load balancer's name")
	cfg := hostedConfig(t, key.Namespace, key.Name)
	endpoint := net.JoinHostPort(ingress.Hostname, strconv.Itoa(int(hcp.Spec.ControlPlaneEndpoint.Port)))
	assert.Equal(t, "https://"+endpoint, cfg.Host, "the kubeconfig names it")
	hosted, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	var tunnel *appsv1.DaemonSet
	eventually(t, 2*time.Minute, "the tunnel DaemonSet in the workload cluster", func() error {
		tunnel, err = hosted.AppsV1().DaemonSets("kube-system").Get(ctx, "kas-tunnel", metav1.GetOptions{})
		return err
	})
	args := tunnel.Spec.Template.Spec.Containers[0].Args
	assert.Contains(t, args, "--upstream="+endpoint, "the tunnel dials the load balancer's name")
	assert.Contains(t, args, "--direct", "without the Gateway's outer TLS")
}

// workerCarriesOnAfterRestore takes a snapshot of the Cluster's etcd,
// which holds the node and the probe pod, restores etcd in place from it,
// and checks that the node's kubelet writes to the restored cluster again
// (its lease is renewed and the node is Ready), that the pod still runs,
// and that kubectl exec reaches it through konnectivity again.
func workerCarriesOnAfterRestore(t *testing.T, store *backupStore, cfg *rest.Config, hosted kubernetes.Interface, key client.ObjectKey, nodeName string) {
	ctx := testContext(t)
	snapshot := snapshotStored(t, store, key).Status.Etcd.LastBackupKey
	// The test's kubelet certificates last minutes (workerSigningDuration),
	// and one that expired while the restore stopped the API servers would
	// leave the kubelet anonymous, its renewal refused, for good (as a
	// year's certificate would after a year's outage). The restore starts
	// with one that lasts longer than a restore on a loaded machine takes.
	eventually(t, 5*time.Minute, "the kubelet holds a certificate that outlasts the restore", func() error {
		expires, err := kubeletCertificateExpiry(ctx, hosted, nodeName)
		if left := time.Until(expires); err == nil && left < restoreAllowance {
			err = fmt.Errorf("its newest certificate expires in %s", left.Round(time.Second))
		}
		return err
	})
	restoreEtcdInPlace(t, key, snapshot)
	restored := time.Now()

	eventually(t, 3*time.Minute, "the kubelet renews its lease in the restored cluster", func() error {
		lease, err := hosted.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if renewed := lease.Spec.RenewTime; renewed == nil || renewed.Before(&metav1.MicroTime{Time: restored}) {
			return fmt.Errorf("lease last renewed %v, the restore ended %v", renewed, restored)
		}
		return nil
	})
	require.NoError(t, nodeReady(ctx, hosted, nodeName)())
	pod, err := hosted.CoreV1().Pods("default").Get(ctx, "probe", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase)
	var stdout, stderr string
	eventually(t, 2*time.Minute, "kubectl exec reaches the pod through konnectivity again", func() error {
		stdout, stderr, err = execIn(ctx, cfg, hosted, "probe", "/probe", "--version")
		if err != nil {
			return fmt.Errorf("exec: %w (stderr %q)", err, stderr)
		}
		return nil
	})
	assert.Equal(t, "probe dev", strings.TrimSpace(stdout))
	t.Logf("the kubelet renewed its lease, and exec reached the pod, %s after the restore", time.Since(restored).Round(time.Second))
}

// restoreAllowance is how long a kubelet's certificate must still last when
// workerCarriesOnAfterRestore starts the restore: the API servers stop
// for up to about two and a half minutes on a loaded machine, and the
// kubelet then needs a moment to renew.
const restoreAllowance = 4*time.Minute + 30*time.Second

// kubeletCertificateExpiry is when the newest client certificate issued to
// the kubelet of node expires, as the CertificateSigningRequests of the
// workload cluster show.
func kubeletCertificateExpiry(ctx context.Context, hosted kubernetes.Interface, node string) (time.Time, error) {
	csrs, err := hosted.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return time.Time{}, err
	}
	var newest time.Time
	for _, csr := range csrs.Items {
		block, _ := pem.Decode(csr.Status.Certificate)
		if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || block == nil {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return time.Time{}, fmt.Errorf("CSR %s: %w", csr.Name, err)
		}
		if cert.Subject.CommonName == "system:node:"+node && cert.NotAfter.After(newest) {
			newest = cert.NotAfter
		}
	}
	if newest.IsZero() {
		return newest, fmt.Errorf("no client certificate issued to the kubelet of %s", node)
	}
	return newest, nil
}

// bootstrapToken creates a bootstrap token in the hosted cluster and waits
// until the hosted controller manager's bootstrap signer has signed
// cluster-info with it, which kubeadm join's discovery verifies.
func bootstrapToken(t *testing.T, hostedClient client.Client, hosted kubernetes.Interface) string {
	t.Helper()
	ctx := testContext(t)
	var token string
	// The controller creates kube-system in the hosted cluster's first
	// reconcile through the ClusterCache; retry until it can be written to.
	eventually(t, 2*time.Minute, "a bootstrap token is created", func() error {
		var err error
		token, err = cluster.NewBootstrapToken(ctx, hostedClient, time.Hour)
		return err
	})
	id := strings.SplitN(token, ".", 2)[0]
	eventually(t, 2*time.Minute, "cluster-info is signed for token "+id, func() error {
		cm, err := hosted.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := cm.Data["jws-kubeconfig-"+id]; !ok {
			return fmt.Errorf("no jws-kubeconfig-%s in cluster-info (keys %v)", id, slices.Sorted(maps.Keys(cm.Data)))
		}
		return nil
	})
	return token
}

// workerSpec is a worker of a test: its node's name, its link (see
// cluster.WorkerConfig.Index), its share of the pod network, and the image
// tarballs it holds beyond those every worker runs.
type workerSpec struct {
	name     string
	index    int
	podCIDR  string
	tarballs []string
}

// startWorker starts a worker that joins the Cluster with token, pinning
// the cluster CA from the <cluster>-ca Secret as the kubeadm bootstrap
// provider does. With tunnel, it also loads the image of the tunnel that
// carries the kubernetes Service in gateway mode and to an endpoint that is a
// name.
func startWorker(t *testing.T, ns, clusterName string, spec workerSpec, token string, tunnel bool) *cluster.Worker {
	t.Helper()
	ctx := testContext(t)
	ca := &corev1.Secret{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName + "-ca"}, ca))
	hash, err := cluster.CACertHash(ca.Data[corev1.TLSCertKey])
	require.NoError(t, err)
	// Cluster API copies the control plane's endpoint into the Cluster at
	// its next pass over the Cluster once the control plane says it is
	// initialized, which may come a moment after the control plane is
	// Available (seen in CI, on a loaded machine).
	var endpoint clusterv1.APIEndpoint
	eventually(t, time.Minute, "the Cluster has a control plane endpoint", func() error {
		c := &clusterv1.Cluster{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, c); err != nil {
			return err
		}
		if endpoint = c.Spec.ControlPlaneEndpoint; !endpoint.IsValid() {
			return fmt.Errorf("spec.controlPlaneEndpoint %+v", endpoint)
		}
		return nil
	})
	bins := images.HostBinaries(root)
	refs := []string{
		"registry.k8s.io/pause:" + images.PauseVersion,
		"registry.k8s.io/kube-proxy:" + images.KubeVersion,
		"registry.k8s.io/coredns/coredns:" + images.CoreDNSVersion,
		"registry.k8s.io/kas-network-proxy/proxy-agent:" + images.KonnectivityVersion,
		images.ProbeImage,
	}
	if tunnel {
		refs = append(refs, contract.DefaultTunnelImage)
	}
	tarballs := slices.Clone(spec.tarballs)
	for _, ref := range refs {
		tarballs = append(tarballs, images.Tarball(root, ref))
	}
	start := time.Now()
	nodeName := spec.name
	w, err := mgmt.StartWorker(ctx, cluster.WorkerConfig{
		Name: nodeName, Index: spec.index,
		Kubeadm: bins["kubeadm"], Kubelet: bins["kubelet"],
		Endpoint:   net.JoinHostPort(endpoint.Host, strconv.Itoa(int(endpoint.Port))),
		Token:      token,
		CACertHash: hash,
		PodCIDR:    spec.podCIDR,
		Tarballs:   tarballs,
	})
	if err != nil {
		dumpLogDir(t.Output(), filepath.Join(mgmt.LogDir(), "workers", nodeName))
	}
	require.NoError(t, err, "start worker %s", nodeName)
	t.Logf("worker %s joined in %s (node IP %s)", nodeName, time.Since(start).Round(time.Second), w.NodeIP)
	return w
}

// nodeReady is a check that node is Ready; its error is the Ready
// condition's reason and message.
func nodeReady(ctx context.Context, hosted kubernetes.Interface, name string) func() error {
	return func() error {
		node, err := hosted.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return cluster.NodeReady(node)
	}
}

// readyPodOn checks that a pod matching selector runs ready on node.
func readyPodOn(ctx context.Context, hosted kubernetes.Interface, ns, selector, node string) error {
	pods, err := hosted.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	var seen []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == node && podReady(&p) {
			return nil
		}
		seen = append(seen, fmt.Sprintf("%s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase))
	}
	return fmt.Errorf("no ready pod among %v", seen)
}

// createProbe runs the probe image with args as a hardened pod on node, with
// the default service account's token.
func createProbe(t *testing.T, hosted kubernetes.Interface, node, name string, args ...string) {
	t.Helper()
	ctx := testContext(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "probe", Image: images.ProbeImage,
				Args: args,
				// Imported into the worker; nothing can be pulled.
				ImagePullPolicy: corev1.PullNever,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	// The default ServiceAccount appears with the namespace's first
	// reconcile by the hosted controller manager.
	eventually(t, time.Minute, "the "+name+" pod is created", func() error {
		_, err := hosted.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	eventually(t, 3*time.Minute, "the "+name+" pod runs", func() error {
		p, err := hosted.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("%s: %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
}

// execIn runs command in the first container of a pod in default through
// the API server, as kubectl exec does: over WebSocket, falling back to
// SPDY.
func execIn(ctx context.Context, cfg *rest.Config, hosted kubernetes.Interface, pod string, command ...string) (string, string, error) {
	req := hosted.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	websocket, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return "", "", err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return "", "", err
	}
	exec, err := remotecommand.NewFallbackExecutor(websocket, spdy, httpstream.IsUpgradeFailure)
	if err != nil {
		return "", "", err
	}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	return stdout.String(), stderr.String(), err
}

// dumpWorker prints what a failed worker test needs: the hosted cluster's
// nodes and the pods that are not ready, and into the failure log the
// worker's logs.
func dumpWorker(t *testing.T, w *cluster.Worker, hosted kubernetes.Interface) {
	ctx := context.Background()
	if nodes, err := hosted.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range nodes.Items {
			c := readyCondition(&n)
			t.Logf("node %s: Ready=%s %s: %s", n.Name, c.Status, c.Reason, c.Message)
		}
	}
	if pods, err := hosted.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			if !podReady(&p) {
				t.Logf("hosted pod %s/%s on %q: %s%s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, containerStates(p.Status.ContainerStatuses))
			}
		}
	}
	f := failureLog(t, filepath.Base(w.LogDir()))
	defer f.Close()
	dumpLogDir(f, w.LogDir())
}

// dumpLogDir writes the last lines of each log in dir.
func dumpLogDir(w io.Writer, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		tail, err := cluster.TailFile(filepath.Join(dir, e.Name()), 40)
		_, _ = fmt.Fprintf(w, "--- %s (%v), last lines:\n%s\n", e.Name(), err, tail)
	}
}
