package e2e

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/local"
)

// A hosted etcd of one member on a 1Gi volume (quota 224MiB) with autoGrow
// up to 2Gi, filled through the hosted API server until etcd refuses
// writes: the control plane tells the NOSPACE alarm, autoGrow grows the
// claim and the filesystem on its volume to 2Gi and the quota with them,
// the alarm is disarmed, writes resume, and every object written before is
// there with its content.
func TestEtcdNoSpace(t *testing.T) {
	parallel(t)
	ns := namespace(t, "nospace")
	apply(t, ns, strings.Replace(hostedCluster("nospace", images.KubeVersion, 1, 1),
		"volumeSize: 1Gi}", "volumeSize: 1Gi, autoGrow: true, maxVolumeSize: 2Gi}", 1))
	key := client.ObjectKey{Namespace: ns, Name: "nospace"}
	ctx := testContext(t)
	start := time.Now()
	require.NoError(t, local.WaitAvailable(ctx, k8s, key, 15*time.Minute))
	t.Logf("Available %s after the Cluster was created", time.Since(start).Round(time.Second))
	cfg := hostedConfig(t, ns, "nospace")
	cfg.QPS, cfg.Burst = 50, 50 // client-go's 5 a second would set the pace
	hosted, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	// While the database fills, the controller is paused, so that etcd
	// refuses writes before autoGrow sees the database past 80% of its
	// quota, as when it fills faster than the controller looks.
	pause(t, key, true)
	start = time.Now()
	written, refusal := fillEtcd(t, hosted)
	t.Logf("%d ConfigMaps of 1MiB written in %s, then the API server refused: %v",
		len(written), time.Since(start).Round(time.Second), refusal)

	pause(t, key, false)
	start = time.Now()
	var told string
	eventually(t, 5*time.Minute, "the control plane tells the NOSPACE alarm", func() error {
		told = noSpaceTold(t, key)
		if told == "" {
			return fmt.Errorf("no condition or event of %s tells NOSPACE", key)
		}
		return nil
	})
	t.Logf("told %s after the controller resumed: %s", time.Since(start).Round(time.Second), told)

	start = time.Now()
	want := resource.MustParse("2Gi")
	eventually(t, 10*time.Minute, "autoGrow grows the volume to 2Gi", func() error { return volumesGrown(ctx, key, 1, want) })
	t.Logf("the claim and filesystem at 2Gi and the quota raised %s later", time.Since(start).Round(time.Second))
	start = time.Now()
	waitVoters(t, key, 1)
	t.Logf("EtcdReady %s later", time.Since(start).Round(time.Second))
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(ctx, key, hcp))
	assert.Equal(t, "2Gi", hcp.Status.Etcd.VolumeSize.String(), "status.etcd.volumeSize")
	t.Logf("status.etcd.volumeUsage %s", hcp.Status.Etcd.VolumeUsage)
	// The alarm is disarmed in a pass after the members answer with the
	// larger quota, which may come after EtcdReady.
	var story []string
	eventually(t, 2*time.Minute, "an event tells that the alarm was disarmed", func() error {
		story = etcdEvents(t, key)
		if !slices.ContainsFunc(story, func(e string) bool {
			return strings.HasPrefix(e, v1alpha1.EtcdNoSpaceReason+": disarmed the NOSPACE alarm")
		}) {
			return fmt.Errorf("events: %q", story)
		}
		return nil
	})
	for _, e := range story {
		t.Log("  event " + e)
	}

	_, err = hosted.CoreV1().ConfigMaps("default").Create(ctx, fillConfigMap("after"), metav1.CreateOptions{})
	require.NoError(t, err, "writes resume")
	for _, name := range written {
		cm, err := hosted.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
		if assert.NoError(t, err, "ConfigMap %s written before the refusal", name) {
			assert.True(t, cm.Data["fill"] == fillConfigMap(name).Data["fill"], "ConfigMap %s keeps its content", name)
		}
	}
	deleteClusters(t, key)
}

// pause pauses the reconciliation of a control plane (Cluster API's paused
// annotation), or resumes it, and waits until its Paused condition says so.
func pause(t *testing.T, key client.ObjectKey, paused bool) {
	t.Helper()
	ctx := testContext(t)
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(ctx, key, hcp))
	patch := client.MergeFrom(hcp.DeepCopy())
	if paused {
		metav1.SetMetaDataAnnotation(&hcp.ObjectMeta, clusterv1.PausedAnnotation, "")
	} else {
		delete(hcp.Annotations, clusterv1.PausedAnnotation)
	}
	require.NoError(t, k8s.Patch(ctx, hcp, patch))
	eventually(t, 2*time.Minute, fmt.Sprintf("the control plane's Paused condition is %v", paused), func() error {
		if err := k8s.Get(ctx, key, hcp); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(hcp.Status.Conditions, clusterv1.PausedCondition); c == nil || (c.Status == metav1.ConditionTrue) != paused {
			return fmt.Errorf("condition %v", c)
		}
		return nil
	})
}

// fillEtcd creates ConfigMaps of 1MiB in the hosted cluster, four at a time,
// until the API server refuses one because etcd's database space is
// exceeded, and returns those created and the refusal. A write that fails
// with an error a client retries is tried again.
func fillEtcd(t *testing.T, hosted kubernetes.Interface) ([]string, error) {
	ctx := testContext(t)
	var (
		mu      sync.Mutex
		next    int
		written []string
		refusal error
		wg      sync.WaitGroup
	)
	claim := func() (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		next++
		// 224MiB of quota take some 220 of them.
		return fmt.Sprintf("fill-%03d", next), refusal == nil && next <= 400
	}
	for range 4 {
		wg.Go(func() {
			for name, ok := claim(); ok; name, ok = claim() {
				var err error
				for try := 0; try < 5; try++ {
					_, err = hosted.CoreV1().ConfigMaps("default").Create(ctx, fillConfigMap(name), metav1.CreateOptions{})
					if err == nil || apierrors.IsAlreadyExists(err) || !retryable(err) {
						break
					}
				}
				mu.Lock()
				switch {
				case err == nil || apierrors.IsAlreadyExists(err): // a retry of one that was stored
					written = append(written, name)
				case strings.Contains(err.Error(), "database space exceeded"):
					refusal = cmp.Or(refusal, err)
				default:
					t.Errorf("write %s: %v", name, err)
					refusal = cmp.Or(refusal, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Error(t, refusal, "the API server refuses a write once etcd's quota of a 1Gi volume is full")
	require.ErrorContains(t, refusal, "database space exceeded")
	slices.Sort(written)
	return written, refusal
}

// fillConfigMap is a ConfigMap of 1MiB, at most what the API server takes,
// whose content tells its name.
func fillConfigMap(name string) *corev1.ConfigMap {
	const size = 1<<20 - 4096
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"e2e": "nospace"}},
		Data:       map[string]string{"fill": strings.Repeat(name+";", size/(len(name)+1))},
	}
}

// noSpaceTold is what tells a user of the control plane that etcd raised
// NOSPACE: its EtcdReady condition or one of its events (other than that
// the alarm was disarmed); empty while nothing does.
func noSpaceTold(t *testing.T, key client.ObjectKey) string {
	t.Helper()
	hcp := &v1alpha1.HostedControlPlane{}
	require.NoError(t, k8s.Get(testContext(t), key, hcp))
	if c := apimeta.FindStatusCondition(hcp.Status.Conditions, v1alpha1.EtcdReadyCondition); c != nil && strings.Contains(c.Message, "NOSPACE") &&
		!strings.Contains(c.Message, "disarmed") {
		return fmt.Sprintf("condition EtcdReady %s %s: %s", c.Status, c.Reason, c.Message)
	}
	for _, e := range etcdEvents(t, key) {
		if strings.Contains(e, "NOSPACE") && !strings.Contains(e, "disarmed") {
			return "event " + e
		}
	}
	return ""
}

// etcdEvents are the events of the control plane about its etcd's
// databases and volumes, as "reason: message".
func etcdEvents(t *testing.T, key client.ObjectKey) []string {
	t.Helper()
	events := &corev1.EventList{}
	require.NoError(t, k8s.List(testContext(t), events, client.InNamespace(key.Namespace)))
	slices.SortStableFunc(events.Items, func(a, b corev1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	var told []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "HostedControlPlane" && e.InvolvedObject.Name == key.Name && slices.Contains([]string{
			v1alpha1.EtcdNoSpaceReason, v1alpha1.EtcdDefragmentedReason, v1alpha1.EtcdVolumesGrowingReason, v1alpha1.EtcdVolumeNotExpandableReason,
		}, e.Reason) {
			told = append(told, e.Reason+": "+e.Message)
		}
	}
	return told
}
