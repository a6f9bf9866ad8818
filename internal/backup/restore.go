package backup

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// RestoreURLExpiry is how long the presigned URL of a snapshot to restore
// is valid. While the restore is pending it is renewed once half of that
// passed, so a member that starts (or starts again) finds a valid one.
const RestoreURLExpiry = time.Hour

// restorePoll is how often a pending restore looks whether etcd answers.
const restorePoll = 10 * time.Second

// urlExpiresAnnotation on the restore Secret says when its URL expires.
const urlExpiresAnnotation = "controlplane.cluster.x-k8s.io/restore-url-expires"

// restoring is whether spec.etcd.restore is not done yet.
func restoring(hcp *v1alpha1.HostedControlPlane) bool {
	return hcp.Spec.Etcd.Restore != nil && hcp.Status.Etcd.RestoredFrom == nil
}

// restore drives spec.etcd.restore of a control plane until its etcd
// answers: it chooses the snapshot once, so that every member restores the
// same, and gives the members a presigned URL of it in the restore Secret,
// without which no member starts. Once etcd answers it records what was
// restored.
func (r *Reconciler) restore(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string) (ctrl.Result, error) {
	helper, err := patch.NewHelper(hcp, r.client)
	if err != nil {
		return ctrl.Result{}, err
	}
	secret, err := r.restoreSecret(ctx, hcp, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	answered, err := r.etcdAnswered(ctx, hcp, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	result := ctrl.Result{RequeueAfter: restorePoll}
	if key := string(secret.Data[contract.EtcdRestoreKeyKey]); answered && key != "" {
		revision := contract.EtcdSnapshotRevision(key)
		hcp.Status.Etcd.RestoredFrom = &v1alpha1.EtcdRestoredFrom{Key: key, Revision: revision}
		msg := fmt.Sprintf("etcd was restored from %s (revision %d, bumped by %d)", key, revision, contract.EtcdRevisionBump)
		r.setRestored(hcp, metav1.ConditionTrue, v1alpha1.ReadyReason, msg, corev1.EventTypeNormal)
		result = ctrl.Result{RequeueAfter: time.Second} // the schedule takes over
	} else if key, err := r.prepareRestore(ctx, hcp, cluster, secret, atCreation(hcp, cluster)); err != nil {
		r.setRestored(hcp, metav1.ConditionFalse, reasonOf(err), "etcd does not start until its snapshot is found: "+err.Error(), corev1.EventTypeWarning)
		result.RequeueAfter = r.opts.RetryInterval
	} else {
		r.setRestored(hcp, metav1.ConditionFalse, v1alpha1.RestorePendingReason,
			fmt.Sprintf("every etcd member restores %s before it first starts", key), "")
	}
	return result, helper.Patch(ctx, hcp, patch.WithOwnedConditions{Conditions: []string{v1alpha1.EtcdRestoredCondition}})
}

// setRestored sets EtcdRestored and, when its message changes, tells it in
// an event of eventType (none when empty).
func (r *Reconciler) setRestored(hcp *v1alpha1.HostedControlPlane, status metav1.ConditionStatus, reason, msg, eventType string) {
	if c := conditions.Get(hcp, v1alpha1.EtcdRestoredCondition); eventType != "" && (c == nil || c.Message != msg) {
		r.recorder.Eventf(hcp, nil, eventType, reason, "Restore", "%s", msg)
	}
	conditions.Set(hcp, metav1.Condition{
		Type: v1alpha1.EtcdRestoredCondition, Status: status, Reason: reason, Message: msg, ObservedGeneration: hcp.Generation,
	})
}

// restoreSecret is the control plane's restore Secret, empty when there is
// none of this control plane (one left by an earlier control plane of the
// same name does not count).
func (r *Reconciler) restoreSecret(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: hcp.Namespace, Name: contract.EtcdRestoreSecretName(cluster)}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return &corev1.Secret{}, nil
	case err != nil:
		return nil, fmt.Errorf("read the restore Secret: %w", err)
	case !ownedBy(secret, hcp.UID):
		secret.Data = nil
	}
	return secret, nil
}

// etcdAnswered is whether the control plane's etcd ever answered: the
// controller then records its members as existing.
func (r *Reconciler) etcdAnswered(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string) (bool, error) {
	cm := &corev1.ConfigMap{}
	err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: hcp.Namespace, Name: etcd.MembersConfigMap(cluster)}, cm)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the etcd members ConfigMap: %w", err)
	}
	return ownedBy(cm, hcp.UID) && etcd.Existing(cm), nil
}

func ownedBy(obj client.Object, uid types.UID) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

// restoreRequest is a snapshot to restore: "latest" of a cluster's folder
// (<namespace>/<name>) or a key, and the ID of a restore in place (empty
// for spec.etcd.restore).
type restoreRequest struct {
	snapshot, folder, id string
}

// atCreation is the restore spec.etcd.restore asks for.
func atCreation(hcp *v1alpha1.HostedControlPlane, cluster string) restoreRequest {
	folder := hcp.Spec.Etcd.Restore.FromCluster
	if folder == "" {
		folder = hcp.Namespace + "/" + cluster
	}
	return restoreRequest{snapshot: hcp.Spec.Etcd.Restore.Snapshot, folder: folder}
}

// prepareRestore makes sure the restore Secret names the snapshot of req
// with a URL that stays valid for a while, and returns the snapshot's key.
// The snapshot is chosen once, when the Secret names none for req.
func (r *Reconciler) prepareRestore(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string, secret *corev1.Secret, req restoreRequest) (string, error) {
	key := string(secret.Data[contract.EtcdRestoreKeyKey])
	if string(secret.Data[contract.EtcdRestoreIDKey]) != req.id {
		key = "" // written for another restore
	}
	if expires, err := time.Parse(time.RFC3339, secret.Annotations[urlExpiresAnnotation]); key != "" && err == nil &&
		time.Until(expires) > RestoreURLExpiry/2 {
		return key, nil
	}
	st, err := openStore(ctx, r.apiReader, hcp, req.folder)
	if err != nil {
		return "", err
	}
	defer st.close()
	if key == "" {
		key, err = st.resolve(ctx, r.apiReader, hcp, req.snapshot)
	} else {
		// Chosen before, and still only while it may be read.
		err = st.permitKey(ctx, r.apiReader, hcp, key)
	}
	if err != nil {
		return "", err
	}
	expires := time.Now().Add(RestoreURLExpiry)
	u, err := st.client.PresignedGetObject(ctx, st.bucket, key, RestoreURLExpiry, nil)
	if err != nil {
		return "", st.explain(err)
	}
	data := map[string][]byte{contract.EtcdRestoreKeyKey: []byte(key), contract.EtcdRestoreURLKey: []byte(u.String())}
	if len(st.ca) > 0 {
		data[contract.EtcdRestoreCAKey] = st.ca
	}
	if req.id != "" {
		data[contract.EtcdRestoreIDKey] = []byte(req.id)
	}
	return key, r.writeRestoreSecret(ctx, hcp, cluster, data, expires)
}

// writeRestoreSecret creates or replaces the restore Secret.
func (r *Reconciler) writeRestoreSecret(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string, data map[string][]byte, expires time.Time) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hcp.Namespace, Name: contract.EtcdRestoreSecretName(cluster)}}
	err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(secret), secret)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read the restore Secret: %w", err)
	}
	exists := err == nil
	secret.Labels = map[string]string{
		contract.ControlPlaneLabel: hcp.Name, contract.ComponentLabel: contract.EtcdComponent,
		contract.InstanceLabel: cluster, contract.ManagedByLabel: contract.ManagedBy,
	}
	secret.Annotations = map[string]string{urlExpiresAnnotation: expires.UTC().Format(time.RFC3339)}
	secret.Type, secret.Data, secret.OwnerReferences = corev1.SecretTypeOpaque, data, nil
	if err := controllerutil.SetControllerReference(hcp, secret, r.client.Scheme()); err != nil {
		return err
	}
	if exists {
		err = r.client.Update(ctx, secret)
	} else {
		err = r.client.Create(ctx, secret)
	}
	if err != nil {
		return fmt.Errorf("write the restore Secret: %w", err)
	}
	return nil
}

// restoreInPlace takes the request of the restore-etcd annotation: it
// chooses the snapshot and writes the restore Secret for a new restore ID,
// records the restore in status.etcd.restoring, from which the control
// plane reconciler stops and restores etcd, and only then removes the
// annotation, so that a request is never taken twice. A snapshot that
// cannot be had stops nothing: EtcdRestored says why, and it is tried
// again until the annotation is removed.
func (r *Reconciler) restoreInPlace(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string) (ctrl.Result, error) {
	helper, err := patch.NewHelper(hcp, r.client)
	if err != nil {
		return ctrl.Result{}, err
	}
	req := restoreRequest{
		snapshot: hcp.Annotations[v1alpha1.RestoreEtcdAnnotation], folder: hcp.Namespace + "/" + cluster,
		id: time.Now().UTC().Format("20060102T150405Z"),
	}
	key, err := r.prepareRestore(ctx, hcp, cluster, &corev1.Secret{}, req)
	if err != nil {
		r.setRestored(hcp, metav1.ConditionFalse, reasonOf(err), fmt.Sprintf("etcd is not restored in place, and nothing was stopped: %v; "+
			"it is tried again until the annotation %s is removed", err, v1alpha1.RestoreEtcdAnnotation), corev1.EventTypeWarning)
		return ctrl.Result{RequeueAfter: r.opts.RetryInterval}, helper.Patch(ctx, hcp, patch.WithOwnedConditions{Conditions: []string{v1alpha1.EtcdRestoredCondition}})
	}
	hcp.Status.Etcd.Restoring = &v1alpha1.EtcdRestoring{ID: req.id, Key: key}
	r.setRestored(hcp, metav1.ConditionFalse, v1alpha1.StoppingForRestoreReason,
		fmt.Sprintf("etcd is restored in place from %s (restore %s): the API servers, controller-manager and scheduler stop first, then every etcd member", key, req.id),
		corev1.EventTypeNormal)
	if err := helper.Patch(ctx, hcp, patch.WithOwnedConditions{Conditions: []string{v1alpha1.EtcdRestoredCondition}}); err != nil {
		return ctrl.Result{}, err
	}
	return r.keepRestoring(ctx, hcp, cluster)
}

// keepRestoring keeps the URL of a restore in place valid while it is under
// way, and removes the annotation that asked for it.
func (r *Reconciler) keepRestoring(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string) (ctrl.Result, error) {
	if _, asked := hcp.Annotations[v1alpha1.RestoreEtcdAnnotation]; asked {
		before := hcp.DeepCopy()
		delete(hcp.Annotations, v1alpha1.RestoreEtcdAnnotation)
		if err := r.client.Patch(ctx, hcp, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	restoring := hcp.Status.Etcd.Restoring
	secret, err := r.restoreSecret(ctx, hcp, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	req := restoreRequest{snapshot: restoring.Key, folder: hcp.Namespace + "/" + cluster, id: restoring.ID}
	if _, err := r.prepareRestore(ctx, hcp, cluster, secret, req); err != nil {
		r.recorder.Eventf(hcp, nil, corev1.EventTypeWarning, reasonOf(err), "Restore", "the restore Secret of restore %s cannot be written: %v", restoring.ID, err)
	}
	// The control plane reconciler ends the restore; then the schedule
	// takes over.
	return ctrl.Result{RequeueAfter: r.opts.RetryInterval}, nil
}

// resolve is the key of snapshot ("latest" or a key) in the store, which
// must hold it. A key is confined to the folders hcp may read: its own
// namespace's, or those a grant allows.
func (s *store) resolve(ctx context.Context, r client.Reader, hcp *v1alpha1.HostedControlPlane, snapshot string) (string, error) {
	if snapshot == "" || snapshot == v1alpha1.LatestSnapshot {
		keys, err := s.snapshots(ctx)
		if err != nil {
			return "", err
		}
		if len(keys) == 0 {
			return "", problem(v1alpha1.SnapshotNotFoundReason, "no snapshot of Cluster %s in the store of %s", s.folder(), s.origin)
		}
		return keys[len(keys)-1], nil
	}
	if err := s.permitKey(ctx, r, hcp, snapshot); err != nil {
		return "", err
	}
	if _, err := s.client.StatObject(ctx, s.bucket, snapshot, minio.StatObjectOptions{}); err != nil {
		if minio.ToErrorResponse(err).Code != minio.NoSuchKey {
			return "", s.explain(err)
		}
		// A HEAD answers a missing bucket with the same bare 404.
		if exists, err := s.client.BucketExists(ctx, s.bucket); err != nil || !exists {
			return "", s.explain(cmp.Or(err, error(minio.ErrorResponse{Code: minio.NoSuchBucket})))
		}
		return "", problem(v1alpha1.SnapshotNotFoundReason, "snapshot %s does not exist in the store of %s", snapshot, s.origin)
	}
	return snapshot, nil
}
