package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A volume is a sparse file of the size its claim asks for, formatted XFS
// and mounted through a loop device on the directory the PersistentVolume
// names (a host path), so that it fills up and grows like a disk. XFS
// rather than ext4: growing a mounted ext4 (resize2fs) needs
// CAP_SYS_RESOURCE, which root lacks on the machines this runs on, while
// xfs_growfs needs only CAP_SYS_ADMIN.

// minVolumeBytes is the smallest volume made, larger than XFS's smallest
// filesystem (300MB); smaller claims get this much, as provisioners round
// up.
const minVolumeBytes = 512 << 20

// provisionVolumes makes a volume, bound to its claim, for every pending
// claim of the default StorageClass, grows the volume of a bound claim that
// asks for more, and deletes released volumes with their files. It reads
// claims and volumes with one list each: it runs every second.
func (c *Cluster) provisionVolumes(ctx context.Context) error {
	volumes := &corev1.PersistentVolumeList{}
	if err := c.Client.List(ctx, volumes); err != nil {
		return err
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := c.Client.List(ctx, claims); err != nil {
		return err
	}
	byName := map[string]*corev1.PersistentVolume{}
	var errs []error
	for i := range volumes.Items {
		pv := &volumes.Items[i]
		byName[pv.Name] = pv
		if pv.Status.Phase == corev1.VolumeReleased && pv.Annotations["pv.kubernetes.io/provisioned-by"] == provisioner {
			errs = append(errs, c.release(ctx, pv))
		}
	}
	for i := range claims.Items {
		pvc := &claims.Items[i]
		if ptr.Deref(pvc.Spec.StorageClassName, "") != StorageClass {
			continue
		}
		switch pv := byName[pvc.Spec.VolumeName]; {
		case pvc.Status.Phase == corev1.ClaimPending && pvc.Spec.VolumeName == "":
			errs = append(errs, c.provision(ctx, pvc))
		case pvc.Status.Phase == corev1.ClaimBound && pv != nil:
			errs = append(errs, c.expand(ctx, pvc, pv))
		}
	}
	return errors.Join(errs...)
}

// volumeBytes is the size of the volume for what pvc asks: whole MiB, at
// least minVolumeBytes.
func volumeBytes(pvc *corev1.PersistentVolumeClaim) int64 {
	asked := pvc.Spec.Resources.Requests.Storage().Value()
	return max((asked+1<<20-1)&^(1<<20-1), minVolumeBytes)
}

func (c *Cluster) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	name := "pvc-" + string(pvc.UID)
	dir := filepath.Join(c.layout.path("volumes"), name)
	size := volumeBytes(pvc)
	if err := makeVolume(ctx, dir, size); err != nil {
		return fmt.Errorf("volume for claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              StorageClass,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectory)},
			},
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
			},
		},
	}
	return client.IgnoreAlreadyExists(c.Client.Create(ctx, pv))
}

// image is the file that holds the volume mounted at dir.
func image(dir string) string { return dir + ".img" }

// makeVolume makes a volume of size bytes mounted at dir, writable by any
// user (pods write as whatever user they run as); a volume already mounted
// there is kept.
func makeVolume(ctx context.Context, dir string, size int64) error {
	if mounted, err := isMountPoint(dir); err != nil || mounted {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.Create(image(dir))
	if err != nil {
		return err
	}
	err = f.Truncate(size) // sparse: no block is written until the filesystem is
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// mount's loop option attaches a loop device that goes with the mount.
	for _, cmd := range [][]string{{"mkfs.xfs", "-q", "-f", image(dir)}, {"mount", "-o", "loop", image(dir), dir}} {
		if err := run(ctx, cmd...); err != nil {
			return err
		}
	}
	return os.Chmod(dir, 0o777) //nolint:gosec // see above
}

// expand grows the volume of a bound claim that asks for more than it has,
// mounted as it is, as a storage driver with online expansion does: the
// file, then the loop device, then the filesystem; then the volume's and
// the claim's capacity say so. pv is the claim's volume.
func (c *Cluster) expand(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) error {
	want := volumeBytes(pvc)
	if pv.Annotations["pv.kubernetes.io/provisioned-by"] != provisioner || pv.Spec.HostPath == nil {
		return nil
	}
	if pv.Spec.Capacity.Storage().Value() < want {
		if err := growVolume(ctx, pv.Spec.HostPath.Path, want); err != nil {
			return fmt.Errorf("grow the volume of claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
		}
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(want, resource.BinarySI)}
		if err := c.Client.Update(ctx, pv); err != nil {
			return err
		}
	}
	capacity := *pv.Spec.Capacity.Storage()
	if pvc.Status.Capacity.Storage().Cmp(capacity) == 0 {
		return nil
	}
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: capacity}
	pvc.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: capacity}
	delete(pvc.Status.AllocatedResourceStatuses, corev1.ResourceStorage)
	pvc.Status.Conditions = nil // no resize pending
	return c.Client.Status().Update(ctx, pvc)
}

// growVolume grows the volume mounted at dir to size bytes, online.
func growVolume(ctx context.Context, dir string, size int64) error {
	if err := os.Truncate(image(dir), size); err != nil {
		return err
	}
	devices, err := loopDevices(func(file string) bool { return file == image(dir) })
	if err != nil {
		return err
	}
	if len(devices) != 1 {
		return fmt.Errorf("%s is attached to %d loop devices, not one", image(dir), len(devices))
	}
	if err := run(ctx, "losetup", "--set-capacity", devices[0]); err != nil {
		return err
	}
	return run(ctx, "xfs_growfs", dir)
}

// release deletes a released volume: its mount, loop device, files and
// PersistentVolume.
func (c *Cluster) release(ctx context.Context, pv *corev1.PersistentVolume) error {
	dir := pv.Spec.HostPath.Path
	if err := unmount(dir); err != nil {
		return err
	}
	if err := detachLoops(func(file string) bool { return file == image(dir) }); err != nil {
		return err
	}
	for _, path := range []string{dir, image(dir)} {
		if err := os.RemoveAll(path); err != nil {
			return err
		}
	}
	return client.IgnoreNotFound(c.Client.Delete(ctx, pv))
}

// unmount unmounts dir, lazily while a process still uses it; nothing when
// it is not mounted.
func unmount(dir string) error {
	err := syscall.Unmount(dir, 0)
	if errors.Is(err, syscall.EBUSY) {
		err = syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	if err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// loopDevices are the loop devices whose backing file matches.
func loopDevices(match func(file string) bool) ([]string, error) {
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return nil, err
	}
	var devices []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // detached meanwhile
		}
		// A deleted backing file reads "<path> (deleted)".
		if file := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)"); match(file) {
			devices = append(devices, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return devices, nil
}

// detachLoops detaches the loop devices whose backing file matches; one
// still in use goes once its last user closes it.
func detachLoops(match func(file string) bool) error {
	devices, err := loopDevices(match)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range devices {
		if out, err := exec.Command("losetup", "--detach", d).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("detach %s: %w: %s", d, err, out))
		}
	}
	return errors.Join(errs...)
}

// isMountPoint tells whether something is mounted at dir.
func isMountPoint(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 4 && unescapeMount(fields[4]) == dir {
			return true, nil
		}
	}
	return false, s.Err()
}

func run(ctx context.Context, cmd ...string) error {
	if out, err := exec.CommandContext(ctx, cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd, " "), err, out)
	}
	return nil
}
