package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A claim gets a filesystem of the size it asks for; asking for more grows
// it while mounted, and the volume's and claim's capacity say so; a
// released volume goes with its loop device; and Teardown detaches the loop
// device of a volume it finds, twice without harm. It needs root, loop
// devices and xfsprogs, so it runs only with E2E=1, as the end-to-end tests.
func TestVolumesHaveARealSizeAndGrowOnline(t *testing.T) {
	if os.Getenv("E2E") != "1" {
		t.Skip("set E2E=1 (as root, with xfsprogs) to make loop-mounted volumes")
	}
	dir := t.TempDir()
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: "c1"}}
	claim.Spec.StorageClassName = ptr.To(StorageClass)
	claim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	claim.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	claim.Status.Phase = corev1.ClaimPending
	c := &Cluster{
		layout: layout{dir},
		Client: fake.NewClientBuilder().WithObjects(claim).WithStatusSubresource(claim, &corev1.PersistentVolume{}).Build(),
	}
	ctx := t.Context()
	t.Cleanup(func() { _ = Teardown(dir, "") })

	require.NoError(t, c.provisionVolumes(ctx))
	pv := &corev1.PersistentVolume{}
	require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Name: "pvc-c1"}, pv))
	assert.Equal(t, "1Gi", pv.Spec.Capacity.Storage().String())
	path := pv.Spec.HostPath.Path
	assert.InDelta(t, 1<<30, size(t, path), 100<<20, "a 1Gi filesystem, less its metadata")
	require.NoError(t, os.WriteFile(filepath.Join(path, "data"), []byte("kept"), 0o600))

	// The provisioner binds; the claim asks for more.
	require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim))
	claim.Spec.VolumeName = pv.Name
	claim.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	require.NoError(t, c.Client.Update(ctx, claim))
	claim.Status.Phase = corev1.ClaimBound
	claim.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	require.NoError(t, c.Client.Status().Update(ctx, claim))

	require.NoError(t, c.provisionVolumes(ctx))
	assert.InDelta(t, 2<<30, size(t, path), 100<<20, "grown to 2Gi while mounted")
	kept, err := os.ReadFile(filepath.Join(path, "data"))
	require.NoError(t, err)
	assert.Equal(t, "kept", string(kept))
	require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(pv), pv))
	assert.Equal(t, "2Gi", pv.Spec.Capacity.Storage().String())
	require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim))
	assert.Equal(t, "2Gi", claim.Status.Capacity.Storage().String())

	pv.Status.Phase = corev1.VolumeReleased
	require.NoError(t, c.Client.Status().Update(ctx, pv))
	require.NoError(t, c.provisionVolumes(ctx))
	assert.Empty(t, loops(t, dir), "the loop device went with the volume")
	assert.NoFileExists(t, image(path))

	// A volume that Teardown finds, mounted: it is unmounted and its loop
	// device detached, and a second Teardown finds nothing to do.
	other := filepath.Join(dir, "volumes", "pvc-other")
	require.NoError(t, makeVolume(ctx, other, minVolumeBytes))
	assert.Len(t, loops(t, dir), 1)
	require.NoError(t, Teardown(dir, ""))
	assert.Empty(t, loops(t, dir))
	require.NoError(t, Teardown(dir, ""))
}

// size is the size of the filesystem mounted at path.
func size(t *testing.T, path string) float64 {
	t.Helper()
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(path, &st))
	return float64(st.Blocks) * float64(st.Bsize)
}

// loops are the loop devices backed by files under dir.
func loops(t *testing.T, dir string) []string {
	t.Helper()
	devices, err := loopDevices(func(file string) bool { return strings.HasPrefix(file, dir+"/") })
	require.NoError(t, err)
	return devices
}
