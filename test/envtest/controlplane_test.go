package envtest

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// A Cluster and its HostedControlPlane lead to every management-side object,
// issued certificates, a working kubeconfig and, once a real API server runs
// with what was rendered, an Available control plane; a pass over it then
// writes nothing. Not parallel: it waits until the whole controller is
// quiet (waitQuiet) and counts every write it makes.
func TestControlPlaneComesUp(t *testing.T) {
	serial(t)
	ns := namespace(t)
	port := freePort(t)
	cluster := newCluster(t, ns, "demo", int32(port))
	hcp := newControlPlane(t, cluster, nil)

	// A LoadBalancer Service fronts the API server; the test gives it an
	// address as a load balancer controller would.
	svc := get(t, &corev1.Service{}, ns, "demo-apiserver")
	assert.Equal(t, corev1.ServiceTypeLoadBalancer, svc.Spec.Type)
	waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.EndpointPendingReason)
	setStatus(t, svc, func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.0.0.1"}}
	})
	waitCondition(t, hcp, v1alpha1.ExposureReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	waitFor(t, "the endpoint in spec.controlPlaneEndpoint", func() error {
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp); err != nil {
			return err
		}
		if want := (clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(port)}); hcp.Spec.ControlPlaneEndpoint != want {
			return fmt.Errorf("endpoint %+v", hcp.Spec.ControlPlaneEndpoint)
		}
		return nil
	})

	waitCondition(t, hcp, v1alpha1.CertificatesReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	checkCertificates(t, ns)
	waitCondition(t, hcp, v1alpha1.KubeconfigReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	kubeconfig := checkKubeconfig(t, ns, port)

	// Rollout order on a first start: the API servers' Deployment is
	// created beside etcd's StatefulSet, and the controllers wait for an
	// API server to be ready, not for every one (TestUpgradeRollsInOrder:
	// an upgrade waits for etcd, then for every API server).
	etcd := get(t, &appsv1.StatefulSet{}, ns, "demo-etcd")
	assert.Contains(t, etcd.Spec.Template.Spec.Containers[0].Args, "--quota-backend-bytes=738197504",
		"the default 2Gi volume gives etcd a quota of 704Mi")
	get(t, &policyv1.PodDisruptionBudget{}, ns, "demo-etcd")
	get(t, &networkingv1.NetworkPolicy{}, ns, "demo-etcd")
	waitCondition(t, hcp, v1alpha1.EtcdReadyCondition, metav1.ConditionFalse, v1alpha1.ProgressingReason)
	get(t, &appsv1.Deployment{}, ns, "demo-apiserver")
	absent(t, &appsv1.Deployment{}, ns, "demo-controller-manager")
	rollOutStatefulSet(t, ns, "demo-etcd")
	waitCondition(t, hcp, v1alpha1.EtcdReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	checkAPIServerPDB(t, ns)
	absent(t, &appsv1.Deployment{}, ns, "demo-controller-manager")
	runningPod(t, hcp, "demo-apiserver-a", "v1.36.3")
	get(t, &appsv1.Deployment{}, ns, "demo-controller-manager")
	get(t, &appsv1.Deployment{}, ns, "demo-scheduler")
	assert.Equal(t, metav1.ConditionFalse, conditions.Get(get(t, hcp, hcp.Namespace, hcp.Name), v1alpha1.APIServerReadyCondition).Status,
		"the controllers start before every API server is ready")
	rollOutDeployment(t, ns, "demo-apiserver")
	waitCondition(t, hcp, v1alpha1.APIServerReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	rollOutDeployment(t, ns, "demo-controller-manager")
	rollOutDeployment(t, ns, "demo-scheduler")
	waitCondition(t, hcp, v1alpha1.ControllersReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)

	// Until something answers at the endpoint, the control plane is not
	// Available; then it is, and the kubeconfig reaches it.
	assert.Equal(t, metav1.ConditionFalse, waitCondition(t, hcp, v1alpha1.AvailableCondition, metav1.ConditionFalse, v1alpha1.NotAnsweringReason).Status)
	runHostedAPIServer(t, ns, "demo", port)
	waitCondition(t, hcp, v1alpha1.AvailableCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	waitFor(t, "initialization.controlPlaneInitialized", func() error {
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp); err != nil {
			return err
		}
		if !ptr.Deref(hcp.Status.Initialization.ControlPlaneInitialized, false) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	assert.Equal(t, ptr.To(true), hcp.Status.ExternalManagedControlPlane)
	useWorkloadCluster(t, kubeconfig)

	runningPod(t, hcp, "demo-apiserver-b", "v1.36.3")
	waitFor(t, "status.versions", func() error {
		if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp); err != nil {
			return err
		}
		if len(hcp.Status.Versions) != 1 || hcp.Status.Versions[0] != (clusterv1.StatusVersion{Version: "v1.36.3", Replicas: 2}) {
			return fmt.Errorf("versions %v", hcp.Status.Versions)
		}
		return nil
	})
	assert.Equal(t, "app.kubernetes.io/instance=demo,app.kubernetes.io/name=kube-apiserver", hcp.Status.Selector)
	assert.Equal(t, ptr.To[int32](2), hcp.Status.ReadyReplicas)

	t.Run("an unchanged control plane costs no writes", func(t *testing.T) { noWritesWhenUnchanged(t, hcp) })
	t.Run("a certificate issued again keeps it Available", func(t *testing.T) { staysAvailableWhileCertificatesChange(t, hcp) })
	t.Run("renewed certificates roll only what reads them at start", func(t *testing.T) { renewalRollsOnlyWhatReadsAtStart(t, hcp) })
	t.Run("scale", func(t *testing.T) { scaleAPIServers(t, hcp) })
	t.Run("the cluster CA renewed with its key kept has what it signed issued again", func(t *testing.T) { caRenewalReissuesWhatItSigned(t, hcp) })
}

// checkCertificates verifies the issued chain: each leaf verifies against
// its CA, and the API server's serving certificate names the endpoint and
// the in-cluster names.
func checkCertificates(t *testing.T, ns string) {
	t.Helper()
	ca := parseCert(t, get(t, &corev1.Secret{}, ns, "demo-ca").Data["tls.crt"])
	assert.True(t, ca.IsCA)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, tc := range []struct {
		secret string
		usage  x509.ExtKeyUsage
		names  []string
	}{
		{"demo-apiserver", x509.ExtKeyUsageServerAuth, []string{"127.0.0.1", "kubernetes.default.svc", "demo-apiserver." + ns + ".svc", "10.96.0.1"}},
		{"demo-admin", x509.ExtKeyUsageClientAuth, nil},
		{"demo-controller-manager", x509.ExtKeyUsageClientAuth, nil},
		{"demo-etcd-server", x509.ExtKeyUsageServerAuth, []string{"demo-etcd." + ns + ".svc", "demo-etcd-0.demo-etcd-peer." + ns + ".svc"}},
		{"demo-apiserver-etcd-client", x509.ExtKeyUsageClientAuth, nil},
		{"demo-front-proxy-client", x509.ExtKeyUsageClientAuth, nil},
	} {
		secret := get(t, &corev1.Secret{}, ns, tc.secret)
		leaf := parseCert(t, secret.Data["tls.crt"])
		intermediates := x509.NewCertPool()
		for _, c := range parseChain(t, secret.Data["tls.crt"])[1:] {
			intermediates.AddCert(c)
		}
		issuerRoots := x509.NewCertPool()
		issuerRoots.AppendCertsFromPEM(secret.Data["ca.crt"])
		// Leaves of the etcd and front-proxy CAs verify against those CAs,
		// which the cluster CA signs (checked below).
		_, err := leaf.Verify(x509.VerifyOptions{Roots: issuerRoots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{tc.usage}})
		require.NoError(t, err, "%s verifies against its CA", tc.secret)
		for _, name := range tc.names {
			require.NoError(t, leaf.VerifyHostname(name), "%s names %s", tc.secret, name)
		}
	}
	for _, sub := range []string{"demo-etcd", "demo-proxy"} {
		subCA := parseCert(t, get(t, &corev1.Secret{}, ns, sub).Data["tls.crt"])
		_, err := subCA.Verify(x509.VerifyOptions{Roots: roots})
		require.NoError(t, err, "%s is signed by the cluster CA", sub)
	}
	issued := &cmv1.CertificateList{}
	require.NoError(t, env.Client.List(testContext(t), issued, client.InNamespace(ns)))
	names := make([]string, 0, len(issued.Items))
	for _, c := range issued.Items {
		names = append(names, c.Name)
	}
	assert.ElementsMatch(t, []string{
		"demo-ca", "demo-etcd", "demo-proxy", "demo-sa", "demo-admin", "demo-apiserver", "demo-apiserver-kubelet-client",
		"demo-apiserver-etcd-client", "demo-front-proxy-client", "demo-etcd-server", "demo-etcd-peer",
		"demo-etcd-healthcheck-client", "demo-controller-manager", "demo-scheduler", "demo-konnectivity-server",
		"demo-konnectivity-client",
	}, names)
}

// checkKubeconfig reads <cluster>-kubeconfig as Cluster API does.
func checkKubeconfig(t *testing.T, ns string, port int) []byte {
	t.Helper()
	secret := get(t, &corev1.Secret{}, ns, "demo-kubeconfig")
	assert.Equal(t, clusterv1.ClusterSecretType, secret.Type)
	assert.Equal(t, "demo", secret.Labels[clusterv1.ClusterNameLabel])
	cfg, err := clientcmd.Load(secret.Data["value"])
	require.NoError(t, err)
	ctx := cfg.Contexts[cfg.CurrentContext]
	require.NotNil(t, ctx)
	assert.Equal(t, fmt.Sprintf("https://127.0.0.1:%d", port), cfg.Clusters[ctx.Cluster].Server)
	client := parseCert(t, cfg.AuthInfos[ctx.AuthInfo].ClientCertificateData)
	ca := parseCert(t, get(t, &corev1.Secret{}, ns, "demo-ca").Data["tls.crt"])
	require.NoError(t, client.CheckSignatureFrom(ca), "the client certificate is signed by the cluster CA")
	assert.Contains(t, client.Subject.Organization, "system:masters")
	assert.LessOrEqual(t, client.NotAfter.Sub(client.NotBefore), 25*time.Hour, "the admin certificate is short-lived")
	return secret.Data["value"]
}

// useWorkloadCluster creates and reads back an object through the kubeconfig.
func useWorkloadCluster(t *testing.T, kubeconfig []byte) {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx := testContext(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"}, Data: map[string]string{"from": "test"}}
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "hello", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "test", got.Data["from"])
}

// noWritesWhenUnchanged makes the controller run a pass over the control
// plane (a label the rendering ignores changes) and counts its writes in the
// API server's audit log.
func noWritesWhenUnchanged(t *testing.T, hcp *v1alpha1.HostedControlPlane) {
	waitQuiet(t)
	before, _ := reconciles(t)
	since := time.Now()
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		// Added beside the others, as a user would: the controller keeps its
		// own (clusterctl's block-move).
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, "example.com/touched", since.String())
	}))
	waitFor(t, "a pass over the touched control plane", func() error {
		if n, idle := reconciles(t); n <= before || !idle {
			return fmt.Errorf("%v passes, idle %v", n, idle)
		}
		return nil
	})
	writes, err := env.Writes(ControllerUser, since)
	require.NoError(t, err)
	assert.Empty(t, writes, "the controller wrote during a pass over an unchanged control plane")
}

// waitQuiet waits until the controller has written nothing for a while.
func waitQuiet(t *testing.T) {
	t.Helper()
	waitFor(t, "the controller to settle", func() error {
		writes, err := env.Writes(ControllerUser, time.Now().Add(-3*time.Second))
		if err != nil {
			return err
		}
		if len(writes) > 0 {
			return fmt.Errorf("recent writes: %v", writes)
		}
		if _, idle := reconciles(t); !idle {
			return fmt.Errorf("busy")
		}
		return nil
	})
}

// checkAPIServerPDB verifies that two API servers are drained one at a time.
func checkAPIServerPDB(t *testing.T, ns string) {
	t.Helper()
	pdb := get(t, &policyv1.PodDisruptionBudget{}, ns, "demo-apiserver")
	assert.Equal(t, ptr.To(intstr.FromInt32(1)), pdb.Spec.MaxUnavailable)
	assert.Equal(t, map[string]string{"app.kubernetes.io/name": "kube-apiserver", "app.kubernetes.io/instance": "demo"},
		pdb.Spec.Selector.MatchLabels, "the budget selects the API server pods")
}

func scaleAPIServers(t *testing.T, hcp *v1alpha1.HostedControlPlane) {
	scaleAPIServersTo(t, hcp, 3)
	kcm := get(t, &appsv1.Deployment{}, hcp.Namespace, "demo-controller-manager")
	assert.Equal(t, ptr.To[int32](2), kcm.Spec.Replicas, "scaling API servers leaves the controllers alone")
	get(t, &policyv1.PodDisruptionBudget{}, hcp.Namespace, "demo-apiserver")

	// One API server has no budget to keep; etcd keeps its own.
	scaleAPIServersTo(t, hcp, 1)
	waitFor(t, "the API servers' PodDisruptionBudget to go", func() error {
		err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: hcp.Namespace, Name: "demo-apiserver"}, &policyv1.PodDisruptionBudget{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
	get(t, &policyv1.PodDisruptionBudget{}, hcp.Namespace, "demo-etcd")
}

// scaleAPIServersTo scales as kubectl scale does and rolls the new count out.
func scaleAPIServersTo(t *testing.T, hcp *v1alpha1.HostedControlPlane, n int32) {
	ctx := testContext(t)
	body := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: hcp.Name, Namespace: hcp.Namespace}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
	require.NoError(t, env.Client.SubResource("scale").Update(ctx, hcp, client.WithSubResourceBody(body)))
	waitFor(t, fmt.Sprintf("%d API server replicas", n), func() error {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: hcp.Namespace, Name: "demo-apiserver"}, d); err != nil {
			return err
		}
		if *d.Spec.Replicas != n {
			return fmt.Errorf("replicas %d", *d.Spec.Replicas)
		}
		return nil
	})
	waitCondition(t, hcp, v1alpha1.APIServerReadyCondition, metav1.ConditionFalse, v1alpha1.ProgressingReason)
	rollOutDeployment(t, hcp.Namespace, "demo-apiserver")
	waitCondition(t, hcp, v1alpha1.APIServerReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
}

func parseChain(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		certs = append(certs, c)
	}
	require.NotEmpty(t, certs)
	return certs
}

func parseCert(t *testing.T, data []byte) *x509.Certificate { return parseChain(t, data)[0] }

// staysAvailableWhileCertificatesChange adds a certSAN, which issues the API
// server's certificate again (which the API servers read again, so none
// rolls), and watches every
// status written meanwhile: phases wait, and Available stays true, since the
// API server answers all along.
func staysAvailableWhileCertificatesChange(t *testing.T, hcp *v1alpha1.HostedControlPlane) {
	ctx := testContext(t)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	require.NoError(t, err)
	w, err := wc.Watch(ctx, &v1alpha1.HostedControlPlaneList{}, client.InNamespace(hcp.Namespace),
		client.MatchingFields{"metadata.name": hcp.Name})
	require.NoError(t, err)
	defer w.Stop()
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Spec.APIServer.CertSANs = append(h.Spec.APIServer.CertSANs, "renamed.example.com")
	}))

	phases := []string{
		v1alpha1.CertificatesReadyCondition, v1alpha1.KubeconfigReadyCondition, v1alpha1.EtcdReadyCondition,
		v1alpha1.APIServerReadyCondition, v1alpha1.ControllersReadyCondition,
	}
	var waited []string
	deadline := time.After(time.Minute)
	for {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-deadline:
			t.Fatalf("the control plane did not settle again; phases that waited: %v", waited)
		}
		got, ok := ev.Object.(*v1alpha1.HostedControlPlane)
		if !ok || got.Generation != got.Status.ObservedGeneration {
			continue
		}
		available := conditions.Get(got, v1alpha1.AvailableCondition)
		require.NotNil(t, available)
		require.Equal(t, metav1.ConditionTrue, available.Status, "Available while %v waited: %s", waited, available.Message)
		settled := true
		for _, p := range phases {
			if c := conditions.Get(got, p); c == nil || c.Status != metav1.ConditionTrue {
				settled = false
				waited = append(waited, p)
			}
		}
		if settled && len(waited) > 0 {
			break
		}
		// No Deployment controller runs here: the test rolls them out.
		for _, d := range []string{"demo-apiserver", "demo-controller-manager", "demo-scheduler"} {
			require.NoError(t, RollOutDeployment(ctx, env.Client, client.ObjectKey{Namespace: hcp.Namespace, Name: d}))
		}
	}
	t.Logf("phases that waited while Available stayed true: %v", slices.Compact(waited))
	serving := parseCert(t, get(t, &corev1.Secret{}, hcp.Namespace, "demo-apiserver").Data["tls.crt"])
	assert.Contains(t, serving.DNSNames, "renamed.example.com")
}
