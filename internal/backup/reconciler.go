package backup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd/snapshotcheck"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/telemetry"
)

// Finalizer holds a HostedControlPlane with spec.etcd.backup until its
// final snapshot is stored, or given up on. The control plane reconciler
// leaves etcd's certificates alone while it is there.
const Finalizer = "backup.hostedcontrolplane.controlplane.cluster.x-k8s.io"

// Options tune the backup controller.
type Options struct {
	// MaxConcurrent bounds the snapshots taken at once, across all control
	// planes; they are handed out by namespace in turn (see slots).
	MaxConcurrent int
	// MinInterval is the least time between the start of two snapshots of
	// one control plane, scheduled or asked for (MIN_BACKUP_INTERVAL); the
	// final snapshot is never held back by it.
	MinInterval time.Duration
	// RetryInterval is how soon a snapshot that failed is tried again.
	RetryInterval time.Duration
	// SnapshotTimeout bounds one snapshot, upload included.
	SnapshotTimeout time.Duration
	// FinalSnapshotTimeout is how long after the deletion of a control plane
	// its final snapshot is tried before deletion goes on without it.
	FinalSnapshotTimeout time.Duration
	// PartSize is the part size of uploads, the memory each holds.
	PartSize uint64
}

// DefaultOptions are the options cmd/controller runs with.
func DefaultOptions() Options {
	return Options{
		MaxConcurrent: 2, MinInterval: time.Hour, RetryInterval: time.Minute, SnapshotTimeout: 30 * time.Minute,
		FinalSnapshotTimeout: 5 * time.Minute, PartSize: DefaultPartSize,
	}
}

// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list

// Reconciler takes the snapshots of every HostedControlPlane with
// spec.etcd.backup, and prepares the restore spec.etcd.restore asks for.
type Reconciler struct {
	client client.Client
	// apiReader reads what is not ours and not in the label-scoped cache:
	// backup Secrets, etcd's EndpointSlices and client certificate; and the
	// control plane past the cache before a snapshot (behind).
	apiReader client.Reader
	etcd      *etcd.Checker
	recorder  events.EventRecorder
	opts      Options
	// open makes the store a control plane's snapshots go to.
	open opener
	// slots bounds the snapshots taken at once; SetupWithManager makes it.
	slots *slots
}

// NewReconciler returns a Reconciler that reaches etcd through checker's
// clients.
func NewReconciler(c client.Client, apiReader client.Reader, checker *etcd.Checker, recorder events.EventRecorder, opts Options) *Reconciler {
	return &Reconciler{client: c, apiReader: apiReader, etcd: checker, recorder: recorder, opts: opts, open: openStore}
}

// SetupWithManager registers the controller. Its own status writes do not
// bring it back (they change neither generation nor annotations); its
// requeues do, at the next due time, and so does a snapshot slot kept for
// it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	// Wake-ups beyond the buffer are not lost for good: a control plane
	// waiting for a slot comes back after RetryInterval anyway.
	woken := make(chan event.TypedGenericEvent[types.NamespacedName], 1024)
	r.slots = newSlots(r.opts.MaxConcurrent, func(cp types.NamespacedName) {
		select {
		case woken <- event.TypedGenericEvent[types.NamespacedName]{Object: cp}:
		default:
		}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("etcdbackup").
		For(&v1alpha1.HostedControlPlane{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WatchesRawSource(source.Channel(woken, handler.TypedEnqueueRequestsFromMapFunc(
			func(_ context.Context, cp types.NamespacedName) []ctrl.Request {
				return []ctrl.Request{{NamespacedName: cp}}
			}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.MaxConcurrent + quickWorkers}).
		Complete(r)
}

// Reconcile takes a snapshot of one control plane when one is due or asked
// for, and otherwise comes back when the next is due.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	hcp := &v1alpha1.HostedControlPlane{}
	if err := r.client.Get(ctx, req.NamespacedName, hcp); err != nil {
		if apierrors.IsNotFound(err) {
			forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if hcp.Spec.Etcd.Backup == nil {
		return ctrl.Result{}, r.stop(ctx, hcp)
	}
	cluster, err := util.GetOwnerCluster(ctx, r.client, hcp.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("owner cluster: %w", err)
	}
	deleting := !hcp.DeletionTimestamp.IsZero()
	switch {
	case deleting && cluster == nil:
		// Its etcd is found by the Cluster's name: without the Cluster
		// there is nothing to wait for.
		return ctrl.Result{}, r.withoutFinal(ctx, hcp, "the control plane has no Cluster")
	case cluster == nil || annotations.IsPaused(cluster, hcp):
		// Neither Cluster API's owner reference nor unpausing changes the
		// generation: look again later.
		return ctrl.Result{RequeueAfter: r.opts.RetryInterval}, nil
	case deleting:
		return r.final(ctx, hcp, cluster.Name)
	case restorePending(hcp):
		// Nothing to take a snapshot of before etcd is restored, nor while
		// it is restored in place: the control plane reconciler does that.
		return ctrl.Result{RequeueAfter: r.opts.RetryInterval}, nil
	}
	return r.scheduled(ctx, hcp, cluster.Name)
}

// scheduled takes a snapshot when it is due or asked for.
func (r *Reconciler) scheduled(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(hcp, Finalizer) {
		// Added under an optimistic lock, so that neither this finalizer nor
		// one the control plane reconciler adds at the same time is lost;
		// the next pass sees whether it stuck.
		before := hcp.DeepCopy()
		controllerutil.AddFinalizer(hcp, Finalizer)
		err := r.client.Patch(ctx, hcp, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		return ctrl.Result{RequeueAfter: time.Second}, client.IgnoreNotFound(err)
	}
	helper, err := patch.NewHelper(hcp, r.client)
	if err != nil {
		return ctrl.Result{}, err
	}
	sched, err := parseSchedule(hcp.Spec.Etcd.Backup.Schedule, hcp.Namespace+"/"+hcp.Name)
	if err != nil {
		return ctrl.Result{}, err // admission keeps such schedules out
	}
	since := hcp.CreationTimestamp.Time
	if last := hcp.Status.Etcd.LastBackupTime; last != nil {
		since = last.Time
		// After a restart of the controller the metrics start from the status.
		cp := client.ObjectKeyFromObject(hcp)
		newest.set(cp, last.Time)
		if size := hcp.Status.Etcd.LastBackupSize; size != nil {
			snapshotSize.WithLabelValues(cp.Namespace, cp.Name).Set(float64(size.Value()))
		}
	}
	// Schedules stored before admission held them to MinInterval, and
	// requests with backup-now, are held to it here.
	earliest := r.earliest(hcp)
	due := later(sched.next(since), earliest)
	interval.WithLabelValues(hcp.Namespace, hcp.Name).Set(sched.next(due).Sub(due).Seconds())
	_, asked := hcp.Annotations[v1alpha1.BackupNowAnnotation]
	now := time.Now()
	if asked && now.Before(earliest) {
		asked, due = false, earliest
		r.recorder.Eventf(hcp, nil, corev1.EventTypeNormal, backupDeferredReason, "Backup",
			"the snapshot asked for with %s is taken at %s: the platform allows one snapshot of a control plane every %s (MIN_BACKUP_INTERVAL), and the last began at %s",
			v1alpha1.BackupNowAnnotation, earliest.UTC().Format(time.RFC3339), r.opts.MinInterval, hcp.Status.Etcd.LastBackupTime.UTC().Format(time.RFC3339))
	}
	if asked || !now.Before(due) {
		if behind, err := r.behind(ctx, hcp); err != nil || behind {
			// The cache has not seen this controller's own write after
			// its last snapshot yet (a pass woken at once by the slot
			// that snapshot freed): a snapshot now would be a second one.
			return ctrl.Result{RequeueAfter: time.Second}, err
		}
	}
	result := ctrl.Result{RequeueAfter: r.opts.RetryInterval}
	switch {
	case now.Before(due) && !asked:
		// Whether snapshots can be stored is not known before the first:
		// Unknown, not False, so that a new control plane shows nothing
		// failing (kubectl get hcp, status.failing).
		if conditions.Get(hcp, v1alpha1.BackupReadyCondition) == nil {
			setCondition(hcp, metav1.ConditionUnknown, v1alpha1.BackupPendingReason, "no snapshot yet: the first is due at "+due.UTC().Format(time.RFC3339))
		}
		result.RequeueAfter = due.Sub(now)
	case r.snapshot(ctx, hcp, cluster, r.opts.SnapshotTimeout) == nil:
		delete(hcp.Annotations, v1alpha1.BackupNowAnnotation)
		due = later(sched.next(hcp.Status.Etcd.LastBackupTime.Time), r.earliest(hcp))
		result.RequeueAfter = time.Until(due)
	}
	// After a failure the due time stays, in the past: overdue.
	hcp.Status.Etcd.NextBackupTime = &metav1.Time{Time: due}
	return result, helper.Patch(ctx, hcp, patch.WithOwnedConditions{Conditions: []string{v1alpha1.BackupReadyCondition}})
}

// behind tells whether the API server holds a newer state of a control
// plane's snapshots than hcp, read from the cache: another snapshot
// recorded, or the backup-now request already taken.
func (r *Reconciler) behind(ctx context.Context, hcp *v1alpha1.HostedControlPlane) (bool, error) {
	live := &v1alpha1.HostedControlPlane{}
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(hcp), live); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if live.Status.Etcd.LastBackupKey != hcp.Status.Etcd.LastBackupKey {
		return true, nil
	}
	_, asked := hcp.Annotations[v1alpha1.BackupNowAnnotation]
	_, stillAsked := live.Annotations[v1alpha1.BackupNowAnnotation]
	return asked && !stillAsked, nil
}

// final takes the snapshot a control plane being deleted leaves behind,
// trying until FinalSnapshotTimeout after the deletion; then it lets the
// deletion go on without it.
func (r *Reconciler) final(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(hcp, Finalizer) {
		return ctrl.Result{}, nil
	}
	left := time.Until(hcp.DeletionTimestamp.Add(r.opts.FinalSnapshotTimeout))
	// Both times are stored to the second: a snapshot begun in the second of
	// the deletion may have begun before it, so it is not the final one.
	if last := hcp.Status.Etcd.LastBackupTime; last == nil || !last.After(hcp.DeletionTimestamp.Time) {
		if left <= 0 {
			return ctrl.Result{}, r.withoutFinal(ctx, hcp, fmt.Sprintf("none was stored within %s of the deletion", r.opts.FinalSnapshotTimeout))
		}
		helper, err := patch.NewHelper(hcp, r.client)
		if err != nil {
			return ctrl.Result{}, err
		}
		failed := r.snapshot(ctx, hcp, cluster, min(r.opts.SnapshotTimeout, left))
		hcp.Status.Etcd.NextBackupTime = nil
		if err := helper.Patch(ctx, hcp, patch.WithOwnedConditions{Conditions: []string{v1alpha1.BackupReadyCondition}}); err != nil || failed != nil {
			return ctrl.Result{RequeueAfter: min(r.opts.RetryInterval, left)}, err
		}
	}
	// The cluster's etcd goes away with it.
	r.etcd.Forget(types.NamespacedName{Namespace: hcp.Namespace, Name: cluster})
	return ctrl.Result{}, r.removeFinalizer(ctx, hcp)
}

// withoutFinal lets the deletion go on without a final snapshot, and says
// why in BackupReady (after the last failure, if any) and an event.
func (r *Reconciler) withoutFinal(ctx context.Context, hcp *v1alpha1.HostedControlPlane, why string) error {
	if !controllerutil.ContainsFinalizer(hcp, Finalizer) {
		return nil
	}
	helper, err := patch.NewHelper(hcp, r.client)
	if err != nil {
		return err
	}
	msg := "no final snapshot: " + why + "; deletion goes on without it"
	if c := conditions.Get(hcp, v1alpha1.BackupReadyCondition); c != nil && c.Status == metav1.ConditionFalse {
		msg += "; the last failure: " + c.Message
	}
	setCondition(hcp, metav1.ConditionFalse, v1alpha1.FinalSnapshotSkippedReason, msg)
	r.recorder.Eventf(hcp, nil, corev1.EventTypeWarning, v1alpha1.FinalSnapshotSkippedReason, "FinalBackup", msg)
	hcp.Status.Etcd.NextBackupTime = nil
	if err := helper.Patch(ctx, hcp, patch.WithOwnedConditions{Conditions: []string{v1alpha1.BackupReadyCondition}}); err != nil {
		return err
	}
	return r.removeFinalizer(ctx, hcp)
}

// stop undoes what backups added to a control plane whose spec no longer
// asks for them.
func (r *Reconciler) stop(ctx context.Context, hcp *v1alpha1.HostedControlPlane) error {
	forget(client.ObjectKeyFromObject(hcp))
	if hcp.Status.Etcd.NextBackupTime != nil || conditions.Get(hcp, v1alpha1.BackupReadyCondition) != nil {
		helper, err := patch.NewHelper(hcp, r.client)
		if err != nil {
			return err
		}
		hcp.Status.Etcd.NextBackupTime = nil
		conditions.Delete(hcp, v1alpha1.BackupReadyCondition)
		if err := helper.Patch(ctx, hcp, patch.WithOwnedConditions{Conditions: []string{v1alpha1.BackupReadyCondition}}); err != nil {
			return err
		}
	}
	return r.removeFinalizer(ctx, hcp)
}

func (r *Reconciler) removeFinalizer(ctx context.Context, hcp *v1alpha1.HostedControlPlane) error {
	before := hcp.DeepCopy()
	if !controllerutil.RemoveFinalizer(hcp, Finalizer) {
		return nil
	}
	return client.IgnoreNotFound(r.client.Patch(ctx, hcp, client.MergeFrom(before)))
}

// snapshot takes one snapshot within timeout and records the outcome in
// the status, the metrics and, for a failure, an event.
func (r *Reconciler) snapshot(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string, timeout time.Duration) error {
	cp := client.ObjectKeyFromObject(hcp)
	release, ok := r.slots.take(cp)
	if !ok {
		return errWaitingForSlot
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx, span := telemetry.Start(ctx, "etcd snapshot",
		telemetry.Namespace.String(cp.Namespace), telemetry.ControlPlane.String(cp.Name), telemetry.Cluster.String(cluster))
	start := time.Now()
	taken, err := r.take(ctx, hcp, cluster, start)
	span.SetAttributes(attribute.Int64("etcd.snapshot.size", taken.size))
	telemetry.End(span, err)
	if taken.key == "" {
		reason := reasonOf(err)
		snapshotFailures.WithLabelValues(cp.Namespace, cp.Name, reason).Inc()
		setCondition(hcp, metav1.ConditionFalse, reason, err.Error())
		r.recorder.Eventf(hcp, nil, corev1.EventTypeWarning, reason, "Backup", "etcd snapshot failed: %v", err)
		return err
	}
	snapshotDuration.Observe(time.Since(start).Seconds())
	snapshotSize.WithLabelValues(cp.Namespace, cp.Name).Set(float64(taken.size))
	newest.set(cp, start)
	st := &hcp.Status.Etcd
	st.LastBackupTime, st.LastBackupKey = &metav1.Time{Time: start}, taken.key
	st.LastBackupSize = resource.NewQuantity(taken.size, resource.BinarySI)
	msg := fmt.Sprintf("snapshot %s (%s) stored and verified", taken.key, st.LastBackupSize)
	if err != nil {
		// Stored, but older ones stay: said, and tried again next time.
		reason := reasonOf(err)
		snapshotFailures.WithLabelValues(cp.Namespace, cp.Name, reason).Inc()
		msg += "; deleting the snapshots beyond retentionCount failed: " + err.Error()
		setCondition(hcp, metav1.ConditionFalse, reason, msg)
		r.recorder.Eventf(hcp, nil, corev1.EventTypeWarning, reason, "Backup", msg)
		return nil
	}
	if n := len(taken.deleted); n > 0 {
		msg += fmt.Sprintf("; %d older deleted to keep %d", n, retention(hcp))
	}
	setCondition(hcp, metav1.ConditionTrue, v1alpha1.ReadyReason, msg)
	return nil
}

// taken is a snapshot stored: its key, size, and the older ones retention
// deleted.
type taken struct {
	key     string
	size    int64
	deleted []string
}

// take streams a snapshot of the cluster's etcd into its store as it began
// at start, verifies it, and applies retention. A snapshot that was stored
// has a key even when retention then failed (the error).
func (r *Reconciler) take(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string, start time.Time) (taken, error) {
	st, err := r.open(ctx, r.apiReader, hcp, hcp.Namespace+"/"+cluster)
	if err != nil {
		return taken{}, err
	}
	defer st.close()
	target, err := etcd.TargetFor(ctx, r.apiReader, types.NamespacedName{Namespace: hcp.Namespace, Name: cluster})
	if err != nil {
		return taken{}, problem(v1alpha1.EtcdUnavailableReason, "etcd: %v", err)
	}
	snap, err := r.etcd.Snapshot(ctx, target)
	if err != nil {
		return taken{}, problem(v1alpha1.EtcdUnavailableReason, "etcd: %v", err)
	}
	defer func() { _ = snap.Close() }()
	key := fmt.Sprintf("%s%s-rev%d.db", st.prefix, start.UTC().Format("20060102T150405.000Z"), snap.Revision)
	stream := snapshotcheck.Reader(snap)
	size, err := st.objects.put(ctx, key, stream, r.opts.PartSize)
	var p *problemError
	switch {
	case errors.As(err, &p):
		return taken{}, err
	case errors.Is(err, snapshotcheck.ErrCorrupt):
		return taken{}, problem(v1alpha1.SnapshotFailedReason, "the snapshot from %s failed its sha256 check; nothing was stored", snap.Endpoint)
	case err != nil:
		// What broke the stream from etcd; the store's failures are problems.
		return taken{}, problem(v1alpha1.SnapshotFailedReason, "the snapshot stream from %s broke: %v", snap.Endpoint, err)
	}
	if stored, _, err := st.objects.size(ctx, key); err != nil || stored != stream.Size() || size != stream.Size() {
		_ = st.objects.remove(ctx, key)
		return taken{}, problem(v1alpha1.SnapshotFailedReason, "the store of %s did not keep the %d bytes of %s whole (stored: %d, %v); it was deleted",
			st.origin, stream.Size(), key, stored, err)
	}
	deleted, err := st.keepNewest(ctx, retention(hcp))
	return taken{key: key, size: size, deleted: deleted}, err
}

// retention is how many snapshots are kept.
func retention(hcp *v1alpha1.HostedControlPlane) int {
	if n := hcp.Spec.Etcd.Backup.RetentionCount; n != nil {
		return int(*n)
	}
	return 7
}

func setCondition(hcp *v1alpha1.HostedControlPlane, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(hcp, metav1.Condition{
		Type: v1alpha1.BackupReadyCondition, Status: status, Reason: reason, Message: message, ObservedGeneration: hcp.Generation,
	})
}
