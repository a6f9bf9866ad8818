package e2e

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
)

// policiesEnforced shows, with kube-router enforcing NetworkPolicies in the
// management cluster, that the control plane name in ns is fenced off both
// ways. From a pod in another namespace (another tenant's), its etcd (by
// pod address and through its Service) and its controller manager and
// scheduler cannot be reached, while its API server can. From inside one of
// its API server pods (an ephemeral container: the API server's image has
// no shell, and the container shares the pod's network and so its policy),
// the management API server cannot be reached, through the kubernetes
// Service or at its address, while its own etcd can. The probe dials each
// address once (3s timeout). kube-router rejects what a policy does not
// admit, so the dial is refused; every address refused here does listen:
// etcd answers the API server beside it, the controllers' ports answer
// their kubelet's probes (the pods are ready), and the management API server
// answers the tests.
func policiesEnforced(t *testing.T, ns, name string) {
	ip := func(component string) string {
		pods := &corev1.PodList{}
		require.NoError(t, k8s.List(testContext(t), pods, client.InNamespace(ns), client.MatchingLabels{
			contract.ComponentLabel: component, contract.InstanceLabel: name,
		}))
		for _, p := range pods.Items {
			if podReady(&p) {
				return p.Status.PodIP
			}
		}
		require.FailNow(t, "no ready pod", "%s of %s/%s", component, ns, name)
		return ""
	}
	at := func(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
	etcd := ip(contract.EtcdComponent)
	etcdService := at(contract.EtcdServerName(name, ns), contract.EtcdClientPort)

	intruder := namespace(t, ns+"-intruder")
	got := dialFromPod(t, intruder,
		at(etcd, contract.EtcdClientPort), at(etcd, 2380), etcdService,
		at(ip(contract.ControllerManagerComponent), 10257), at(ip(contract.SchedulerComponent), 10259),
		at(ip(contract.APIServerComponent), contract.APIServerPort))
	for addr, result := range got {
		if strings.HasSuffix(addr, ":"+strconv.Itoa(contract.APIServerPort)) {
			assert.Equal(t, "ok", result, "another tenant's pod reaches the API server at %s", addr)
			continue
		}
		assert.NotEqual(t, "ok", result, "another tenant's pod must not reach %s", addr)
	}

	got = dialFromAPIServer(t, ns, name,
		"10.96.0.1:443", at(cluster.NodeIP, cluster.APIServerPort), etcdService)
	assert.Equal(t, "ok", got[etcdService], "the API server reaches its etcd")
	for _, addr := range []string{"10.96.0.1:443", at(cluster.NodeIP, cluster.APIServerPort)} {
		assert.NotEqual(t, "ok", got[addr], "a hosted API server must not reach the management API server at %s", addr)
	}
}

// dialArgs are the probe's arguments to dial addrs.
func dialArgs(addrs []string) []string {
	args := make([]string, 0, len(addrs))
	for _, a := range addrs {
		args = append(args, "--dial="+a)
	}
	return args
}

// hardened is the probe container's security context, which the hosted
// pods' restrictions admit.
func hardened() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
		AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// dialFromPod runs the probe in a pod of ns and returns what it said of
// each address.
func dialFromPod(t *testing.T, ns string, addrs ...string) map[string]string {
	t.Helper()
	ctx := testContext(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dial", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "probe", Image: images.ProbeImage, ImagePullPolicy: corev1.PullNever,
				Args: dialArgs(addrs), SecurityContext: hardened(),
			}},
		},
	}
	require.NoError(t, k8s.Create(ctx, pod))
	eventually(t, 2*time.Minute, "the probe pod ends", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("%s", pod.Status.Phase)
		}
		return nil
	})
	return dialed(t, ns, pod.Name, "probe", addrs)
}

// dialFromAPIServer runs the probe as an ephemeral container in a ready API
// server pod of the control plane name in ns, and returns what it said of
// each address.
func dialFromAPIServer(t *testing.T, ns, name string, addrs ...string) map[string]string {
	t.Helper()
	ctx := testContext(t)
	pods := &corev1.PodList{}
	require.NoError(t, k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{
		contract.ComponentLabel: contract.APIServerComponent, contract.InstanceLabel: name,
	}))
	var pod *corev1.Pod
	for i := range pods.Items {
		if podReady(&pods.Items[i]) {
			pod = &pods.Items[i]
			break
		}
	}
	require.NotNil(t, pod, "a ready API server pod")
	const container = "dial"
	pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: container, Image: images.ProbeImage, ImagePullPolicy: corev1.PullNever,
			Args: dialArgs(addrs), SecurityContext: hardened(),
		},
	})
	_, err := clientset.CoreV1().Pods(ns).UpdateEphemeralContainers(ctx, pod.Name, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, 2*time.Minute, "the ephemeral probe ends", func() error {
		p, err := clientset.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, s := range p.Status.EphemeralContainerStatuses {
			if s.Name == container && s.State.Terminated != nil {
				return nil
			}
		}
		return fmt.Errorf("not ended: %+v", p.Status.EphemeralContainerStatuses)
	})
	return dialed(t, ns, pod.Name, container, addrs)
}

// dialed reads the probe's log: one "dial <addr>: <result>" line per
// address.
func dialed(t *testing.T, ns, pod, container string, addrs []string) map[string]string {
	t.Helper()
	raw, err := clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(testContext(t))
	require.NoError(t, err)
	t.Logf("%s/%s %s:\n%s", ns, pod, container, raw)
	out := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if addr, result, ok := strings.Cut(strings.TrimPrefix(line, "dial "), ": "); ok {
			out[addr] = result
		}
	}
	for _, a := range addrs {
		require.Contains(t, out, a, "the probe dialled %s", a)
	}
	return out
}
