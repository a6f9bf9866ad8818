package envtest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// newCluster creates a Cluster whose control plane is the HostedControlPlane
// of the same name, with the API server port given (0 for the default).
func newCluster(t testing.TB, ns, name string, port int32) *clusterv1.Cluster {
	t.Helper()
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
	c.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{"192.168.0.0/16"}
	c.Spec.ClusterNetwork.APIServerPort = port
	c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{
		APIGroup: v1alpha1.GroupVersion.Group, Kind: "HostedControlPlane", Name: name,
	}
	require.NoError(t, env.Client.Create(testContext(t), c))
	return c
}

// newControlPlane creates the HostedControlPlane of cluster. No Cluster API
// core controller runs here, so the test sets the owner reference to the
// Cluster that Cluster API would set.
func newControlPlane(t testing.TB, cluster *clusterv1.Cluster, change func(*v1alpha1.HostedControlPlane)) *v1alpha1.HostedControlPlane {
	t.Helper()
	hcp := &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{
		Namespace: cluster.Namespace, Name: cluster.Name,
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID,
		}},
	}}
	hcp.Spec.Version = "v1.36.3"
	if change != nil {
		change(hcp)
	}
	require.NoError(t, env.Client.Create(testContext(t), hcp))
	return hcp
}

// waitFor polls for up to a minute until check passes, failing with its
// last complaint.
func waitFor(t testing.TB, what string, check func() error) {
	t.Helper()
	const timeout = time.Minute
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: still not so after %s: %v", what, timeout, err)
}

// waitCondition waits until the control plane's condition has status and a
// reason, returning the condition.
func waitCondition(t testing.TB, hcp *v1alpha1.HostedControlPlane, condition string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var got *metav1.Condition
	waitFor(t, fmt.Sprintf("%s %s=%s (%s)", hcp.Name, condition, status, reason), func() (err error) {
		got, err = conditionIs(t, hcp, condition, status, reason)
		return err
	})
	return got
}

// conditionIs reads the control plane and its condition, with an error
// unless the condition has status and reason.
func conditionIs(t testing.TB, hcp *v1alpha1.HostedControlPlane, condition string, status metav1.ConditionStatus, reason string) (*metav1.Condition, error) {
	t.Helper()
	if err := env.Client.Get(testContext(t), client.ObjectKeyFromObject(hcp), hcp); err != nil {
		return nil, err
	}
	got := conditions.Get(hcp, condition)
	if got == nil || got.Status != status || got.Reason != reason {
		return got, fmt.Errorf("%s is %+v", condition, got)
	}
	return got, nil
}

// get waits for an object to exist and reads it.
func get[T client.Object](t testing.TB, obj T, ns, name string) T {
	t.Helper()
	waitFor(t, fmt.Sprintf("%T %s/%s exists", obj, ns, name), func() error {
		return env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: name}, obj)
	})
	return obj
}

// absent fails when the object exists.
func absent(t *testing.T, obj client.Object, ns, name string) {
	t.Helper()
	err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: name}, obj)
	require.Error(t, err, "%T %s/%s must not exist yet", obj, ns, name)
}

func rollOutStatefulSet(t testing.TB, ns, name string) {
	t.Helper()
	get(t, &appsv1.StatefulSet{}, ns, name)
	require.NoError(t, RollOutStatefulSet(testContext(t), env.Client, client.ObjectKey{Namespace: ns, Name: name}))
}

func rollOutDeployment(t testing.TB, ns, name string) {
	t.Helper()
	get(t, &appsv1.Deployment{}, ns, name)
	require.NoError(t, RollOutDeployment(testContext(t), env.Client, client.ObjectKey{Namespace: ns, Name: name}))
}

// runningPod creates a ready pod of the API server's current template at
// version, as the Deployment controller, the scheduler and a kubelet would.
func runningPod(t testing.TB, hcp *v1alpha1.HostedControlPlane, name, version string) {
	t.Helper()
	d := get(t, &appsv1.Deployment{}, hcp.Namespace, hcp.Name+"-apiserver")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: hcp.Namespace, Name: name, Labels: d.Spec.Template.Labels, Annotations: d.Spec.Template.Annotations}}
	pod.Labels["controlplane.cluster.x-k8s.io/kubernetes-version"] = version
	pod.Spec.Containers = []corev1.Container{{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:" + version}}
	require.NoError(t, env.Client.Create(testContext(t), pod))
	setStatus(t, pod, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	})
}

// reconciles is how many passes the controller has finished, and whether it
// is idle now (nothing queued, no pass running).
func reconciles(t *testing.T) (total float64, idle bool) {
	t.Helper()
	busy := 0.0
	scanner := bufio.NewScanner(strings.NewReader(scrapeController(t)))
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.Contains(line, `"hostedcontrolplane"`) {
			continue
		}
		fields := strings.Fields(line)
		value, _ := strconv.ParseFloat(fields[len(fields)-1], 64)
		switch {
		case strings.HasPrefix(line, "controller_runtime_reconcile_total{"):
			total += value
		case strings.HasPrefix(line, "controller_runtime_active_workers{"), strings.HasPrefix(line, "workqueue_depth{"):
			busy += value
		}
	}
	return total, busy == 0
}

// writeSecretFiles writes each key of a Secret as a file in dir, as the
// kubelet lays out a Secret volume.
func writeSecretFiles(t testing.TB, ns, name, dir string) {
	t.Helper()
	require.NoError(t, writeSecretData(get(t, &corev1.Secret{}, ns, name).Data, dir))
}

// writeSecretData writes data into dir as the kubelet writes a Secret
// volume: each key a link through ..data to a directory of this version's
// files, and ..data swapped in one rename, so that a process that reads a
// certificate and its key while they are written again never gets one of
// each version (the window between its two reads aside, as with the
// kubelet).
func writeSecretData(secretData map[string][]byte, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	version, err := os.MkdirTemp(dir, "..version-")
	if err != nil {
		return err
	}
	for k, v := range secretData {
		if err := os.WriteFile(filepath.Join(version, k), v, 0o600); err != nil {
			return err
		}
	}
	link := filepath.Join(dir, "..data")
	previous, _ := os.Readlink(link)
	staged := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(staged)
	if err := os.Symlink(filepath.Base(version), staged); err != nil {
		return err
	}
	if err := os.Rename(staged, link); err != nil {
		return err
	}
	// The files of the version before go, as the kubelet removes them: a
	// process that watches a file it opened through the links sees it
	// removed.
	if previous != "" {
		if err := os.RemoveAll(filepath.Join(dir, previous)); err != nil {
			return err
		}
	}
	for k := range secretData {
		if _, err := os.Lstat(filepath.Join(dir, k)); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// etcdPods creates the first n pods of the control plane's etcd
// StatefulSet, as its controller would; they are not ready.
func etcdPods(t *testing.T, hcp *v1alpha1.HostedControlPlane, n int) {
	t.Helper()
	sts := get(t, &appsv1.StatefulSet{}, hcp.Namespace, hcp.Name+"-etcd")
	for i := range n {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: hcp.Namespace, Name: fmt.Sprintf("%s-%d", sts.Name, i), Labels: sts.Spec.Template.Labels,
		}}
		pod.Spec.Containers = []corev1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.8-0"}}
		require.NoError(t, env.Client.Create(testContext(t), pod))
	}
}
