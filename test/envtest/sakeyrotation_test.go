package envtest

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/rollout"
)

// A rotation of the service account key, asked for by the rotate
// annotation, walks its phases with a real kube-apiserver running each
// phase's flags and Secrets: a token the old key signed is accepted in
// every phase until the old key is dropped, the API servers sign with the
// new key from SigningWithNewKey on, and at the end <cluster>-sa holds the
// new key (with a certificate cert-manager issued for it), the old key's
// token is refused and the new one's is not. Each rollout is played as the
// Deployment controller and kubelet would: the API server process restarts
// with the new template, pods of the new template replace the old ones. The
// wait for the old key's tokens to expire (a day) is not waited for: the
// test ends it once it saw the phase wait, with the
// drop-old-service-account-key annotation, as a user may.
func TestServiceAccountKeyRotation(t *testing.T) {
	hosted(t)
	port := freePort(t)
	_, hcp := readyControlPlane(t, "sakey", "v1.36.3", func(h *v1alpha1.HostedControlPlane) {
		h.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(port)}
	})
	ns := hcp.Namespace
	etcd := runHostedEtcd(t, ns, "sakey")
	api, _ := etcd.startAPIServer(t, port, nil)
	rollPods(t, hcp)
	waitCondition(t, hcp, v1alpha1.ServiceAccountKeyReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	oldKey := get(t, &corev1.Secret{}, ns, "sakey-sa").Data["tls.key"]

	workload := workloadClient(t, ns, "sakey")
	ctx := testContext(t)
	answered(t, func() error {
		_, err := workload.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
		return err
	})
	answered(t, func() error {
		_, err := workload.CoreV1().ServiceAccounts("app").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
		return err
	})
	oldToken := appToken(t, workload)
	assert.Equal(t, keyID(t, oldKey), tokenKeyID(t, oldToken))
	tokenAccepted(t, workload, oldToken)

	reasons := watchReasons(t, hcp, v1alpha1.ServiceAccountKeyReadyCondition)
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Annotations[v1alpha1.RotateAnnotation] = "service-account-key"
	}))
	start := time.Now()

	// TrustingNewKey: a new key is issued, the API servers trust both and
	// sign with the old.
	waitPhase(t, hcp, v1alpha1.TrustingNewKey)
	cert := waitIssued(t, ns, "sakey-sa-next", 0)
	assert.Equal(t, cmv1.RotationPolicyNever, cert.Spec.PrivateKey.RotationPolicy)
	waitFor(t, "the API servers trust both keys", func() error {
		return apiServerArgs(t, ns, "--service-account-key-file=/etc/kubernetes/pki/sa/tls.key", "--service-account-key-file=/etc/kubernetes/pki/sa-next/tls.key",
			"--service-account-signing-key-file=/etc/kubernetes/pki/sa/tls.key")
	})
	newKey := get(t, &corev1.Secret{}, ns, "sakey-sa-next").Data["tls.key"]
	require.NotEqual(t, keyID(t, oldKey), keyID(t, newKey))
	assert.NotContains(t, get(t, &v1alpha1.HostedControlPlane{}, ns, "sakey").Annotations, v1alpha1.RotateAnnotation, "the request was taken")
	api = restartAPIServer(t, etcd, api, port)
	rollPodsOf(t, hcp, hcp.Name+"-controller-manager")
	// Once the API servers rolled out, the controller manager's Deployment
	// is stamped with the phase (its pods do not change in it). The API
	// server counts an annotation's change as a new generation of a
	// Deployment, which the Deployment controller observes at once; this
	// test plays it, once the stamp is there.
	waitFor(t, "the controller manager's Deployment is stamped with the phase", func() error {
		d := get(t, &appsv1.Deployment{}, ns, "sakey-controller-manager")
		if step := d.Annotations[rollout.RotationAnnotation]; step != "service-account-key=TrustingNewKey" {
			return fmt.Errorf("it is stamped %q", step)
		}
		return nil
	})
	rollPodsOf(t, hcp, "sakey-controller-manager")
	assert.Equal(t, keyID(t, oldKey), tokenKeyID(t, appToken(t, workload)), "still signed with the old key")
	tokenAccepted(t, workload, oldToken)

	// SigningWithNewKey.
	waitPhase(t, hcp, v1alpha1.SigningWithNewKey)
	waitFor(t, "the API servers sign with the new key", func() error {
		return apiServerArgs(t, ns, "--service-account-key-file=/etc/kubernetes/pki/sa/tls.key", "--service-account-key-file=/etc/kubernetes/pki/sa-next/tls.key",
			"--service-account-signing-key-file=/etc/kubernetes/pki/sa-next/tls.key")
	})
	api = restartAPIServer(t, etcd, api, port)
	rollPodsOf(t, hcp, hcp.Name+"-controller-manager")
	// The controller manager follows once the API servers rolled out.
	waitFor(t, "the controller manager signs with the new key", func() error {
		return controllerManagerKey(t, ns, "/etc/kubernetes/pki/sa-next/tls.key")
	})
	rollPodsOf(t, hcp, hcp.Name+"-controller-manager")
	newToken := appToken(t, workload)
	assert.Equal(t, keyID(t, newKey), tokenKeyID(t, newToken), "signed with the new key")
	tokenAccepted(t, workload, oldToken)
	tokenAccepted(t, workload, newToken)

	// WaitingForOldTokens: the old key stays trusted for a day.
	waitPhase(t, hcp, v1alpha1.WaitingForOldTokens)
	c := waitCondition(t, hcp, v1alpha1.ServiceAccountKeyReadyCondition, metav1.ConditionFalse, string(v1alpha1.WaitingForOldTokens))
	assert.Contains(t, c.Message, "nothing signs with the old key any more; it is trusted until")
	time.Sleep(3 * time.Second)
	assert.Equal(t, v1alpha1.WaitingForOldTokens, get(t, &v1alpha1.HostedControlPlane{}, ns, "sakey").Status.ServiceAccountKey.Rotation.Phase)
	// The user ends the wait, as after a leak: every token of the old key
	// this test holds is one it still checks.
	require.NoError(t, update(t, hcp, func(h *v1alpha1.HostedControlPlane) {
		h.Annotations[v1alpha1.DropOldServiceAccountKeyAnnotation] = "true"
	}))

	// DroppingOldKey: <cluster>-sa gets the new key, the API servers trust it
	// alone.
	waitFor(t, "the new key is written into sakey-sa", func() error {
		if s := get(t, &corev1.Secret{}, ns, "sakey-sa"); string(s.Data["tls.key"]) != string(newKey) {
			return fmt.Errorf("sakey-sa holds another key")
		}
		return nil
	})
	waitFor(t, "the API servers trust the new key alone", func() error {
		return apiServerArgs(t, ns, "--service-account-key-file=/etc/kubernetes/pki/sa/tls.key", "--service-account-signing-key-file=/etc/kubernetes/pki/sa/tls.key")
	})
	_ = restartAPIServer(t, etcd, api, port)
	rollPodsOf(t, hcp, hcp.Name+"-controller-manager")
	waitFor(t, "the controller manager signs with the key in sakey-sa", func() error {
		return controllerManagerKey(t, ns, "/etc/kubernetes/pki/sa/tls.key")
	})
	rollPodsOf(t, hcp, hcp.Name+"-controller-manager")

	waitCondition(t, hcp, v1alpha1.ServiceAccountKeyReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
	t.Logf("BENCH rotation_sa_key_envtest_s %.1f s (without the day's wait)", time.Since(start).Seconds())
	tokenRefused(t, workload, oldToken)
	tokenAccepted(t, workload, newToken)
	assert.Equal(t, keyID(t, newKey), tokenKeyID(t, appToken(t, workload)))

	sa := get(t, &corev1.Secret{}, ns, "sakey-sa")
	waitFor(t, "cert-manager issued the certificate of the new key", func() error {
		sa = get(t, &corev1.Secret{}, ns, "sakey-sa")
		certificate := parseCert(t, sa.Data["tls.crt"])
		if keyIDOf(t, certificate.PublicKey) != keyID(t, newKey) {
			return fmt.Errorf("the certificate in sakey-sa is of another key")
		}
		return nil
	})
	assert.Equal(t, newKey, sa.Data["tls.key"], "cert-manager kept the key")
	waitFor(t, "the new key's own Secret and Certificate are removed", func() error {
		for _, obj := range []client.Object{&corev1.Secret{}, &cmv1.Certificate{}} {
			if err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "sakey-sa-next"}, obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T sakey-sa-next: %w", obj, err)
			}
		}
		return nil
	})
	final := get(t, &v1alpha1.HostedControlPlane{}, ns, "sakey")
	assert.Nil(t, final.Status.ServiceAccountKey.Rotation)
	assert.NotContains(t, final.Annotations, v1alpha1.DropOldServiceAccountKeyAnnotation, "the request to drop the old key was taken")
	require.NotNil(t, final.Status.ServiceAccountKey.RotatedAt)

	seen := strings.Join(reasons(), "\n")
	for _, phase := range []v1alpha1.RotationPhase{v1alpha1.TrustingNewKey, v1alpha1.SigningWithNewKey, v1alpha1.WaitingForOldTokens, v1alpha1.DroppingOldKey} {
		assert.Contains(t, seen, string(phase)+": rotation asked for at ", "ServiceAccountKeyReady named the phase")
	}
	for _, key := range [][]byte{oldKey, newKey} {
		assert.NotContains(t, seen, string(key))
		assert.NotContains(t, fmt.Sprintf("%+v", final.Status), string(key))
	}
}

// waitPhase waits for the rotation of the service account key to be in phase.
func waitPhase(t *testing.T, hcp *v1alpha1.HostedControlPlane, phase v1alpha1.RotationPhase) {
	t.Helper()
	waitFor(t, "phase "+string(phase), func() error {
		cp := get(t, &v1alpha1.HostedControlPlane{}, hcp.Namespace, hcp.Name)
		if r := cp.Status.ServiceAccountKey.Rotation; r == nil || r.Phase != phase {
			pods := &corev1.PodList{}
			require.NoError(t, env.Client.List(testContext(t), pods, client.InNamespace(hcp.Namespace)))
			var seen []string
			for _, p := range pods.Items {
				seen = append(seen, fmt.Sprintf("%s %v %v", p.Name, p.DeletionTimestamp, slices.DeleteFunc(slices.Clone(p.Spec.Containers[0].Args), func(a string) bool { return !strings.Contains(a, "service-account") })))
			}
			for _, name := range []string{hcp.Name + "-apiserver", hcp.Name + "-controller-manager"} {
				d := get(t, &appsv1.Deployment{}, hcp.Namespace, name)
				seen = append(seen, fmt.Sprintf("Deployment %s generation %d observed %d", name, d.Generation, d.Status.ObservedGeneration))
			}
			return fmt.Errorf("status.serviceAccountKey: %+v, %s; %s; %s; pods %v", r, conditionOf(cp, v1alpha1.ServiceAccountKeyReadyCondition),
				conditionOf(cp, v1alpha1.APIServerReadyCondition), conditionOf(cp, v1alpha1.ControllersReadyCondition), seen)
		}
		return nil
	})
}

func conditionOf(cp *v1alpha1.HostedControlPlane, condition string) string {
	for _, c := range cp.Status.Conditions {
		if c.Type == condition {
			return c.Reason + ": " + c.Message
		}
	}
	return "no " + condition
}

// apiServerArgs fails unless the API server's template takes exactly the
// service account key flags want.
func apiServerArgs(t *testing.T, ns string, want ...string) error {
	t.Helper()
	d := get(t, &appsv1.Deployment{}, ns, "sakey-apiserver")
	var have []string
	for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(arg, "--service-account-key-file=") || strings.HasPrefix(arg, "--service-account-signing-key-file=") {
			have = append(have, arg)
		}
	}
	if strings.Join(have, " ") != strings.Join(want, " ") {
		return fmt.Errorf("the API servers take %v", have)
	}
	return nil
}

// controllerManagerKey fails unless the controller manager's template
// signs with file.
func controllerManagerKey(t *testing.T, ns, file string) error {
	t.Helper()
	d := get(t, &appsv1.Deployment{}, ns, "sakey-controller-manager")
	if want := "--service-account-private-key-file=" + file; !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, want) {
		return fmt.Errorf("the controller manager does not take %s", want)
	}
	return nil
}

// restartAPIServer stops the API server and starts it with the Deployment's
// template, as a rollout replaces a pod, and replaces its pod with one of
// that template (not of a newer one the Deployment got meanwhile, which the
// API server does not run).
func restartAPIServer(t *testing.T, etcd *hostedEtcd, running *Process, port int) *Process {
	t.Helper()
	require.NoError(t, running.Stop(20*time.Second))
	d := get(t, &appsv1.Deployment{}, etcd.ns, etcd.cluster+"-apiserver")
	next, _ := etcd.startAPIServerOf(t, t.TempDir(), d, port, nil)
	runPodsOf(t, d)
	return next
}

// rollPods plays the rollout of the API servers and the controller
// manager: their pods are replaced by one of the current template each,
// ready, and the Deployments report it.
func rollPods(t *testing.T, hcp *v1alpha1.HostedControlPlane) {
	t.Helper()
	rollPodsOf(t, hcp, hcp.Name+"-apiserver", hcp.Name+"-controller-manager")
}

// rollPodsOf plays the rollout of the named Deployments of the control
// plane.
func rollPodsOf(t *testing.T, hcp *v1alpha1.HostedControlPlane, names ...string) {
	t.Helper()
	for _, name := range names {
		runPodsOf(t, get(t, &appsv1.Deployment{}, hcp.Namespace, name))
	}
}

// runPodsOf replaces the pods of Deployment d with one of the template d
// holds, as read (what its processes were started with, when they run),
// and plays its rollout.
func runPodsOf(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	ctx := testContext(t)
	require.NoError(t, env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(d.Namespace),
		client.MatchingLabels(d.Spec.Selector.MatchLabels), client.GracePeriodSeconds(0)))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: d.Namespace, GenerateName: d.Name + "-", Labels: d.Spec.Template.Labels, Annotations: d.Spec.Template.Annotations,
		},
		Spec: *d.Spec.Template.Spec.DeepCopy(),
	}
	require.NoError(t, env.Client.Create(ctx, pod))
	setStatus(t, pod, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	})
	rollOutDeployment(t, d.Namespace, d.Name)
}

// workloadClient reaches the workload cluster through <cluster>-kubeconfig.
func workloadClient(t *testing.T, ns, cluster string) kubernetes.Interface {
	t.Helper()
	kubeconfig := get(t, &corev1.Secret{}, ns, cluster+"-kubeconfig")
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig.Data["value"])
	require.NoError(t, err)
	return kubernetes.NewForConfigOrDie(cfg)
}

// appToken is a token of service account app/app.
func appToken(t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	var tr *authenticationv1.TokenRequest
	answered(t, func() (err error) {
		tr, err = c.CoreV1().ServiceAccounts("app").CreateToken(testContext(t), "app",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		return err
	})
	return tr.Status.Token
}

// answered makes a request of the workload cluster's API server until it
// answers: one that has just started (a rollout's new pod) may not finish a
// TLS handshake in time on a busy machine. Whatever it answers is the
// answer; an error it answered with fails the test.
func answered(t *testing.T, request func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if err = request(); err == nil {
			return
		}
		var answer apierrors.APIStatus
		if errors.As(err, &answer) {
			break
		}
	}
	require.NoError(t, err)
}

// authenticated asks the API server whether token authenticates service
// account app/app, as it decides for a request that bears it.
func authenticated(t *testing.T, c kubernetes.Interface, token string) bool {
	t.Helper()
	var review *authenticationv1.TokenReview
	answered(t, func() (err error) {
		review, err = c.AuthenticationV1().TokenReviews().Create(testContext(t),
			&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err
	})
	if review.Status.Authenticated {
		require.Equal(t, "system:serviceaccount:app:app", review.Status.User.Username)
	}
	return review.Status.Authenticated
}

func tokenAccepted(t *testing.T, c kubernetes.Interface, token string) {
	t.Helper()
	require.True(t, authenticated(t, c, token), "the token is accepted")
}

func tokenRefused(t *testing.T, c kubernetes.Interface, token string) {
	t.Helper()
	require.False(t, authenticated(t, c, token), "the token is refused")
}

// tokenKeyID is the key ID in a token's header: the API server names the
// key that signed it.
func tokenKeyID(t *testing.T, token string) string {
	t.Helper()
	header, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	require.NoError(t, err)
	var h struct {
		Kid string `json:"kid"`
	}
	require.NoError(t, json.Unmarshal(header, &h))
	return h.Kid
}

// keyID is the key ID the API server gives the key of a PEM private key:
// the digest of its public key.
func keyID(t *testing.T, keyPEM []byte) string {
	t.Helper()
	block, _ := pem.Decode(keyPEM)
	require.NotNil(t, block)
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		parsed, err8 := x509.ParsePKCS8PrivateKey(block.Bytes)
		require.NoError(t, err8)
		return keyIDOf(t, parsed.(crypto.Signer).Public())
	}
	return keyIDOf(t, key.Public())
}

func keyIDOf(t *testing.T, pub crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
