package envtest

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// renewalRollsOnlyWhatReadsAtStart renews every leaf certificate the way
// `cmctl renew` does, with real cert-manager: the processes that read their
// certificates again (etcd, the API servers, the controllers) keep their pod
// templates, <cluster>-kubeconfig follows the renewed admin certificate and
// still reaches the API server; then the konnectivity server's serving
// certificate, read at start, rolls the API servers alone.
func renewalRollsOnlyWhatReadsAtStart(t *testing.T, hcp *v1alpha1.HostedControlPlane) {
	ns := hcp.Namespace
	renewed := waitCondition(t, hcp, v1alpha1.CertificatesRenewedCondition, metav1.ConditionTrue, v1alpha1.RenewedOnScheduleReason)
	assert.Contains(t, renewed.Message, "the next to expire is in Secret demo-admin")
	adminLeft := expirySeconds(t, ns, "demo-admin")
	assert.InDelta(t, (24 * time.Hour).Seconds(), adminLeft, time.Hour.Seconds(), "the metric tells the admin certificate's 24h")
	assert.InDelta(t, (8760 * time.Hour).Seconds(), expirySeconds(t, ns, "demo-apiserver"), (2 * time.Hour).Seconds())
	before := podTemplates(t, ns)
	kubeconfig := get(t, &corev1.Secret{}, ns, "demo-kubeconfig").Data["value"]
	adminBefore := kubeconfigClientSerial(t, kubeconfig)

	leaves := []string{
		"demo-admin", "demo-apiserver", "demo-apiserver-kubelet-client", "demo-apiserver-etcd-client", "demo-front-proxy-client",
		"demo-etcd-server", "demo-etcd-peer", "demo-etcd-healthcheck-client", "demo-controller-manager", "demo-scheduler",
		"demo-konnectivity-client",
	}
	renew(t, ns, leaves...)
	waitCondition(t, hcp, v1alpha1.CertificatesReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	var kubeconfigRenewed []byte
	waitFor(t, "<cluster>-kubeconfig with the renewed admin certificate", func() error {
		kubeconfigRenewed = get(t, &corev1.Secret{}, ns, "demo-kubeconfig").Data["value"]
		admin := parseCert(t, get(t, &corev1.Secret{}, ns, "demo-admin").Data["tls.crt"])
		if got := kubeconfigClientSerial(t, kubeconfigRenewed); got == adminBefore || got != admin.SerialNumber.String() {
			return fmt.Errorf("the kubeconfig's client certificate is %s, the admin Secret's %s", got, admin.SerialNumber)
		}
		return nil
	})
	waitFor(t, "the metric to follow the renewed admin certificate", func() error {
		if left := expirySeconds(t, ns, "demo-admin"); left <= adminLeft {
			return fmt.Errorf("%.0fs left, %.0fs before", left, adminLeft)
		}
		return nil
	})
	waitQuiet(t)
	assert.Equal(t, before, podTemplates(t, ns), "no pod template changed for renewed certificates their processes read again")
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfigRenewed)
	require.NoError(t, err)
	hosted, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = hosted.CoreV1().ConfigMaps("default").Get(testContext(t), "hello", metav1.GetOptions{})
	require.NoError(t, err, "the renewed kubeconfig reaches the API server")

	renew(t, ns, "demo-konnectivity-server")
	waitFor(t, "the API servers to roll for the konnectivity server's certificate", func() error {
		if after := podTemplates(t, ns); after["demo-apiserver"] == before["demo-apiserver"] {
			return fmt.Errorf("the API server template is as before")
		}
		return nil
	})
	after := podTemplates(t, ns)
	var rolled []string
	for name := range after {
		if after[name] != before[name] {
			rolled = append(rolled, name)
		}
	}
	assert.Equal(t, []string{"demo-apiserver"}, rolled, "only the API servers, whose konnectivity server reads its certificate at start")
	// No Deployment controller runs here: the test rolls them out.
	require.NoError(t, RollOutDeployment(testContext(t), env.Client, client.ObjectKey{Namespace: ns, Name: "demo-apiserver"}))
	waitCondition(t, hcp, v1alpha1.APIServerReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
}

// caRenewalReissuesWhatItSigned renews the cluster CA with its key kept,
// as cert-manager does two thirds through its lifetime, and as it does when
// it issues a CA twice in a moment (seen when a control plane is created
// under load): the certificates the CA signed before hold the earlier CA
// certificate as ca.crt, which would roll the pods that read it at start
// at each one's own renewal. The controller asks for every one to be issued
// again at once, and the Certificates condition waits until they are.
func caRenewalReissuesWhatItSigned(t *testing.T, hcp *v1alpha1.HostedControlPlane) {
	ns := hcp.Namespace
	certs := &cmv1.CertificateList{}
	require.NoError(t, env.Client.List(testContext(t), certs, client.InNamespace(ns)))
	signed := map[string]string{}
	for _, c := range certs.Items {
		// The certificate beside the service account key, which nothing
		// reads, waits for its own renewal.
		if c.Spec.IssuerRef.Name == "demo-ca" && !c.Spec.IsCA && c.Name != "demo-sa" {
			signed[c.Spec.SecretName] = parseCert(t, get(t, &corev1.Secret{}, ns, c.Spec.SecretName).Data["tls.crt"]).SerialNumber.String()
		}
	}
	require.Contains(t, signed, "demo-apiserver")
	before := get(t, &corev1.Secret{}, ns, "demo-ca").Data
	renew(t, ns, "demo-ca")
	after := get(t, &corev1.Secret{}, ns, "demo-ca").Data
	require.Equal(t, before["tls.key"], after["tls.key"], "the CA renewed with its key kept")
	require.NotEqual(t, before["ca.crt"], after["ca.crt"])
	waitFor(t, fmt.Sprintf("the %d certificates the CA signed issued again with the renewed CA as ca.crt", len(signed)), func() error {
		var pending []string
		for _, name := range slices.Sorted(maps.Keys(signed)) {
			secret := get(t, &corev1.Secret{}, ns, name)
			if !bytes.Equal(secret.Data["ca.crt"], after["ca.crt"]) || parseCert(t, secret.Data["tls.crt"]).SerialNumber.String() == signed[name] {
				pending = append(pending, name)
			}
		}
		if len(pending) > 0 {
			return fmt.Errorf("not yet: %v", pending)
		}
		return nil
	})
	waitCondition(t, hcp, v1alpha1.CertificatesReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	events := &eventsv1.EventList{}
	require.NoError(t, env.Client.List(testContext(t), events, client.InNamespace(ns)))
	asked := 0
	for _, e := range events.Items {
		if e.Regarding.Name == hcp.Name && e.Action == "ReissueCertificate" && strings.Contains(e.Note, "an earlier certificate of the CA's key") {
			asked++
		}
	}
	assert.Positive(t, asked, "the controller told that it asked for them")
}

// renew asks cert-manager to issue certificates again now, as `cmctl
// renew` does, and waits until each Secret holds a new certificate.
func renew(t *testing.T, ns string, names ...string) {
	t.Helper()
	ctx := testContext(t)
	serials := map[string]string{}
	for _, name := range names {
		serials[name] = parseCert(t, get(t, &corev1.Secret{}, ns, name).Data["tls.crt"]).SerialNumber.String()
		crt := get(t, &cmv1.Certificate{}, ns, name)
		crt.Status.Conditions = append(crt.Status.Conditions, cmv1.CertificateCondition{
			Type: cmv1.CertificateConditionIssuing, Status: cmmeta.ConditionTrue, Reason: "ManuallyTriggered",
			Message: "renewed by the test", ObservedGeneration: crt.Generation, LastTransitionTime: &metav1.Time{Time: metav1.Now().Time},
		})
		require.NoError(t, env.Client.Status().Update(ctx, crt), name)
	}
	waitFor(t, fmt.Sprintf("%d certificates issued again", len(names)), func() error {
		var pending []string
		for _, name := range slices.Sorted(maps.Keys(serials)) {
			if parseCert(t, get(t, &corev1.Secret{}, ns, name).Data["tls.crt"]).SerialNumber.String() == serials[name] {
				pending = append(pending, name)
			}
		}
		if len(pending) > 0 {
			return fmt.Errorf("not yet: %v", pending)
		}
		return nil
	})
}

// expirySeconds is hostedcp_certificate_expiry_seconds of a Secret of the
// control plane demo in ns, as the controller serves it.
func expirySeconds(t *testing.T, ns, secret string) float64 {
	t.Helper()
	want := fmt.Sprintf(`hostedcp_certificate_expiry_seconds{name="demo",namespace=%q,secret=%q} `, ns, secret)
	scanner := bufio.NewScanner(strings.NewReader(scrapeController(t)))
	for scanner.Scan() {
		if value, ok := strings.CutPrefix(scanner.Text(), want); ok {
			v, err := strconv.ParseFloat(value, 64)
			require.NoError(t, err)
			return v
		}
	}
	require.NoError(t, scanner.Err())
	t.Fatalf("no series %s", want)
	return 0
}

// podTemplates are the secrets-hash annotations of the control plane's
// workloads, by name.
func podTemplates(t *testing.T, ns string) map[string]string {
	t.Helper()
	const annotation = "controlplane.cluster.x-k8s.io/secrets-hash"
	templates := map[string]string{"demo-etcd": get(t, &appsv1.StatefulSet{}, ns, "demo-etcd").Spec.Template.Annotations[annotation]}
	for _, name := range []string{"demo-apiserver", "demo-controller-manager", "demo-scheduler"} {
		templates[name] = get(t, &appsv1.Deployment{}, ns, name).Spec.Template.Annotations[annotation]
	}
	return templates
}

// kubeconfigClientSerial is the serial number of a kubeconfig's client
// certificate.
func kubeconfigClientSerial(t *testing.T, kubeconfig []byte) string {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	require.NoError(t, err)
	return parseCert(t, cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].ClientCertificateData).SerialNumber.String()
}
