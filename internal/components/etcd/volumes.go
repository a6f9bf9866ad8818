package etcd

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// claimName is the name of the volume claim template, and so the prefix of
// each member's claim (data-<pod>).
const claimName = "data"

// volumeSize is the size of each member's volume: spec.etcd.volumeSize, or
// what the members' claims ask for when that is more (autoGrow grew them,
// or the spec was put back after they were asked to grow), since volumes
// never shrink.
func volumeSize(in render.Input) resource.Quantity {
	size := contract.EtcdVolumeSize(in.ControlPlane)
	if r := in.EtcdVolumeRequest; r != nil && r.Cmp(size) > 0 {
		return *r
	}
	return size
}

// quotaVolume is the volume size the quota follows: volumeSize, or the
// smallest volume a member has while they grow to it, so that no member
// runs with a quota its volume cannot hold.
func quotaVolume(in render.Input) resource.Quantity {
	size := volumeSize(in)
	if c := in.EtcdVolumeCapacity; c != nil && c.Cmp(size) < 0 {
		return *c
	}
	return size
}

// AutoGrowPercent is how full of its quota a member's database may be
// before autoGrow grows the volumes: where the upgrade gates start holding
// upgrades.
const AutoGrowPercent = 80

// autoGrowTarget is the size autoGrow grows the volumes to from size, and
// why: once a member's database fills AutoGrowPercent of its quota, half
// as much again, rounded up to a whole GiB, at most contract.EtcdMaxVolumeSize
// (why tells a NOSPACE alarm too, which the growth ends).
// It waits for the growth before (every volume grown, every member running
// the quota it brought), and does not grow what would not raise the quota
// (the ceiling, the quota at its most, or a quota set in spec.etcd.args).
func autoGrowTarget(in render.Input, size resource.Quantity) (resource.Quantity, string, bool) {
	spec, m := in.ControlPlane.Spec.Etcd, in.Etcd
	if !contract.EtcdAutoGrow(in.ControlPlane) || m == nil || !m.Answered {
		return resource.Quantity{}, "", false
	}
	if _, set := spec.Args[contract.EtcdQuotaFlag]; set {
		return resource.Quantity{}, "", false
	}
	if c := in.EtcdVolumeCapacity; c == nil || c.Cmp(size) < 0 {
		return resource.Quantity{}, "", false // a growth under way
	}
	quota := contract.EtcdQuota(size)
	var full *render.EtcdMember
	for i, member := range m.Members {
		if member.Quota != quota {
			return resource.Quantity{}, "", false // the quota rolls out
		}
		if member.DBSize*100 >= quota*AutoGrowPercent && (full == nil || member.DBSize > full.DBSize) {
			full = &m.Members[i]
		}
	}
	if full == nil {
		return resource.Quantity{}, "", false
	}
	const gib = 1 << 30
	most := contract.EtcdMaxVolumeSize(in.ControlPlane)
	next := resource.NewQuantity(min((size.Value()*3/2+gib-1)/gib*gib, most.Value()), resource.BinarySI)
	if contract.EtcdQuota(*next) <= quota {
		return resource.Quantity{}, "", false
	}
	why := fmt.Sprintf("member %s's database holds %s, %d%% or more of its quota of %s",
		full.Name, mebibytes(full.DBSize), AutoGrowPercent, mebibytes(quota))
	if m.NoSpace {
		why = "alarm NOSPACE, etcd refuses writes: " + why
	}
	return *next, why, true
}

// VolumeUsage is the largest database file a member reports (etcd's
// dbSize), which is what counts against the backend quota, rounded up to a
// whole MiB: a database that grows by a few pages between two passes, as
// an idle API server's writes make it, does not change the status (a write)
// at every pass. nil when no member reported one.
func VolumeUsage(m *render.EtcdMembership) *resource.Quantity {
	var largest int64
	for _, member := range m.Members {
		largest = max(largest, member.DBSize)
	}
	if largest == 0 {
		return nil
	}
	const mib = 1 << 20
	return resource.NewQuantity((largest+mib-1)/mib*mib, resource.BinarySI)
}

// growVolumes grows the volumes of a running etcd to volumeSize, or to
// what autoGrow asks (see autoGrowTarget), where their StorageClass allows
// expansion: each member's bound claim asks for the new size, and the
// StatefulSet, whose claim template cannot change, is deleted with its pods
// orphaned, so that the pass that finds it gone creates it again with the
// new template and it adopts the running pods (their template is the same,
// so none restarts). The quota follows once every volume has grown (see
// quotaVolume), in a rollout of its own. Where the StorageClass refuses, a
// growth of the spec is held as a problem (the spec can be put back) and
// one of autoGrow told in a Warning event. acted tells whether the pass
// must end here.
func (c Component) growVolumes(ctx context.Context, r client.Reader, in render.Input, live *appsv1.StatefulSet) (readiness.Outcome, bool, error) {
	want, cause := volumeSize(in), "spec.etcd.volumeSize"
	grow, why, auto := autoGrowTarget(in, want)
	if auto {
		want, cause = grow, "autoGrow: "+why
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, claims, client.InNamespace(in.Namespace()), client.MatchingLabels(in.Selector(contract.EtcdComponent))); err != nil {
		return readiness.Outcome{}, true, fmt.Errorf("list etcd volume claims: %w", err)
	}
	// Only a bound claim can ask for more; one still pending grows once bound.
	var small []*corev1.PersistentVolumeClaim
	for i := range claims.Items {
		claim := &claims.Items[i]
		if claim.Status.Phase == corev1.ClaimBound && claim.DeletionTimestamp == nil && claim.Spec.Resources.Requests.Storage().Cmp(want) < 0 {
			small = append(small, claim)
		}
	}
	template := templateSize(live)
	if len(small) == 0 && template.Cmp(want) == 0 {
		return readiness.Outcome{}, false, nil
	}
	if c.Writer == nil {
		return readiness.Outcome{}, false, nil // rendering alone
	}
	if m := in.Etcd; m != nil && m.Answered && len(m.Problems) > 0 && !m.OnlyFull {
		return poll(readiness.Waiting(v1alpha1.EtcdUnhealthyReason, "waiting for a healthy etcd before growing its volumes to %s: %s",
			want.String(), joinProblems(m.Problems))), true, nil
	}
	for _, claim := range small {
		refused, err := c.notExpandable(ctx, claim)
		had := claim.Spec.Resources.Requests.Storage().String()
		switch {
		case err != nil:
			return readiness.Outcome{}, true, err
		case refused != "" && auto:
			// The volumes stay as they are, and etcd's other changes go on.
			if c.Events != nil {
				c.Events.Eventf(in.ControlPlane, nil, corev1.EventTypeWarning, v1alpha1.EtcdVolumeNotExpandableReason, "AutoGrow",
					"%s, but the volumes cannot grow from %s to %s: %s", cause, had, want.String(), refused)
			}
			return readiness.Outcome{}, false, nil
		case refused != "":
			return readiness.Problem(v1alpha1.EtcdVolumeNotExpandableReason,
				"cannot grow the etcd volumes from %s to %s: %s; set spec.etcd.volumeSize back to %s", had, want.String(), refused, had), true, nil
		}
	}
	for _, claim := range small {
		patch := client.MergeFrom(claim.DeepCopy())
		claim.Spec.Resources.Requests[corev1.ResourceStorage] = want
		if err := c.Writer.Patch(ctx, claim, patch); err != nil {
			return readiness.Outcome{}, true, fmt.Errorf("grow etcd volume claim %s to %s: %w", claim.Name, want.String(), err)
		}
	}
	if len(small) > 0 && c.Events != nil {
		c.Events.Eventf(in.ControlPlane, nil, corev1.EventTypeNormal, v1alpha1.EtcdVolumesGrowingReason, "GrowVolumes",
			"growing the volumes of %d etcd members to %s (%s)", len(small), want.String(), cause)
	}
	if template.Cmp(want) == 0 {
		return readiness.Outcome{}, false, nil
	}
	if live.DeletionTimestamp == nil {
		err := c.Writer.Delete(ctx, live, client.PropagationPolicy(metav1.DeletePropagationOrphan),
			client.Preconditions{UID: ptr.To(live.UID)})
		if client.IgnoreNotFound(err) != nil {
			return readiness.Outcome{}, true, fmt.Errorf("delete the etcd StatefulSet, orphaning its pods, to change its volume size: %w", err)
		}
	}
	return poll(readiness.Waiting(v1alpha1.EtcdVolumesGrowingReason,
		"re-creating the etcd StatefulSet for volumes of %s (%s); its pods keep running", want.String(), cause)), true, nil
}

// notExpandable says why the StorageClass of claim does not let its volume
// grow; empty when it does.
func (c Component) notExpandable(ctx context.Context, claim *corev1.PersistentVolumeClaim) (string, error) {
	name := ptr.Deref(claim.Spec.StorageClassName, "")
	if name == "" {
		return fmt.Sprintf("volume claim %s has no StorageClass", claim.Name), nil
	}
	class := &storagev1.StorageClass{}
	err := c.Storage.Get(ctx, client.ObjectKey{Name: name}, class)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("StorageClass %s of volume claim %s does not exist", name, claim.Name), nil
	case err != nil:
		return "", fmt.Errorf("read StorageClass %s: %w", name, err)
	case !ptr.Deref(class.AllowVolumeExpansion, false):
		return fmt.Sprintf("StorageClass %s does not allow volume expansion (allowVolumeExpansion is not true)", name), nil
	}
	return "", nil
}

// templateSize is the size the StatefulSet's claim template asks for.
func templateSize(sts *appsv1.StatefulSet) resource.Quantity {
	for _, t := range sts.Spec.VolumeClaimTemplates {
		if t.Name == claimName {
			return *t.Spec.Resources.Requests.Storage()
		}
	}
	return resource.Quantity{}
}

// volumesGrowing says what a growth still waits for: every member's volume
// to have the size the spec asks for, which the quota then follows.
func volumesGrowing(in render.Input) (readiness.Outcome, bool) {
	have, want := in.EtcdVolumeCapacity, volumeSize(in)
	if have == nil || have.Cmp(want) >= 0 {
		return readiness.Outcome{}, false
	}
	return poll(readiness.Waiting(v1alpha1.EtcdVolumesGrowingReason,
		"waiting for every etcd member's volume to grow from %s to %s; the quota follows then", have.String(), want.String())), true
}

// resizeConditions are the conditions by which a claim tells how its
// expansion goes, or that it failed.
var resizeConditions = []corev1.PersistentVolumeClaimConditionType{
	corev1.PersistentVolumeClaimResizing, corev1.PersistentVolumeClaimFileSystemResizePending,
	corev1.PersistentVolumeClaimControllerResizeError, corev1.PersistentVolumeClaimNodeResizeError,
}

// resizing adds to out what the members' claims say of their expansion
// (the storage driver's progress or error).
func resizing(ctx context.Context, r client.Reader, in render.Input, out readiness.Outcome) (readiness.Outcome, error) {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, claims, client.InNamespace(in.Namespace()), client.MatchingLabels(in.Selector(contract.EtcdComponent))); err != nil {
		return readiness.Outcome{}, fmt.Errorf("list etcd volume claims: %w", err)
	}
	for _, claim := range claims.Items {
		for _, cond := range claim.Status.Conditions {
			if cond.Status == corev1.ConditionTrue && slices.Contains(resizeConditions, cond.Type) {
				out.Message += fmt.Sprintf("; claim %s: %s", claim.Name, cond.Type)
				if cond.Message != "" {
					out.Message += ": " + cond.Message
				}
			}
		}
	}
	return out, nil
}
