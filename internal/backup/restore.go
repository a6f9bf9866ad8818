package backup

import (
	"cmp"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// urlExpiresAnnotation on the restore Secret says when its URL expires.
const urlExpiresAnnotation = "controlplane.cluster.x-k8s.io/restore-url-expires"

// restorePending is whether a restore holds the snapshots back: one
// spec.etcd.restore asks for that is not done yet, one in place under way,
// or a request of the restore-etcd annotation not taken yet.
func restorePending(hcp *v1alpha1.HostedControlPlane) bool {
	_, asked := hcp.Annotations[v1alpha1.RestoreEtcdAnnotation]
	return asked || hcp.Status.Etcd.Restoring != nil || hcp.Spec.Etcd.Restore != nil && hcp.Status.Etcd.RestoredFrom == nil
}

// Restorer finds the snapshot an etcd restores and gives it to the members
// in the control plane's restore Secret. It is a service of the control
// plane reconciler, which owns every restore (the EtcdRestored condition and
// status.etcd.restoring and restoredFrom): it writes the restore Secret and
// reads the store, and records nothing in the control plane.
type Restorer struct {
	client    client.Client
	apiReader client.Reader
	open      opener
}

// NewRestorer returns a Restorer that writes the restore Secret through c
// and reads past the cache through apiReader: backup Secrets, the restore
// Secret, etcd's members ConfigMap, grants.
func NewRestorer(c client.Client, apiReader client.Reader) *Restorer {
	return &Restorer{client: c, apiReader: apiReader, open: openStore}
}

// Request is a snapshot to restore: "latest" of a cluster's folder
// (<namespace>/<name>) or a key, and the ID of a restore in place (empty
// for spec.etcd.restore).
type Request struct {
	Snapshot, Folder, ID string
}

// AtCreation is the restore spec.etcd.restore of hcp, whose Cluster is
// cluster, asks for.
func AtCreation(hcp *v1alpha1.HostedControlPlane, cluster string) Request {
	folder := hcp.Spec.Etcd.Restore.FromCluster
	if folder == "" {
		folder = hcp.Namespace + "/" + cluster
	}
	return Request{Snapshot: hcp.Spec.Etcd.Restore.Snapshot, Folder: folder}
}

// InPlace is a restore in place of snapshot ("latest" or a key of the
// control plane's own folder) for the restore ID id.
func InPlace(hcp *v1alpha1.HostedControlPlane, cluster, snapshot, id string) Request {
	return Request{Snapshot: snapshot, Folder: hcp.Namespace + "/" + cluster, ID: id}
}

// Reason is the condition reason of what Prepare returned.
func Reason(err error) string { return reasonOf(err) }

// Restored is the snapshot spec.etcd.restore restored once etcd answered,
// which the control plane reconciler records by writing the members
// ConfigMap as existing; empty before.
func (r *Restorer) Restored(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string) (string, error) {
	secret, err := r.restoreSecret(ctx, hcp, cluster)
	if err != nil {
		return "", err
	}
	key := string(secret.Data[contract.EtcdRestoreKeyKey])
	if key == "" {
		return "", nil
	}
	cm := &corev1.ConfigMap{}
	err = r.apiReader.Get(ctx, client.ObjectKey{Namespace: hcp.Namespace, Name: etcd.MembersConfigMap(cluster)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read the etcd members ConfigMap: %w", err)
	case !ownedBy(cm, hcp.UID) || !etcd.Existing(cm):
		return "", nil
	}
	return key, nil
}

// restoreSecret is the control plane's restore Secret, empty when there is
// none of this control plane (one left by an earlier control plane of the
// same name does not count).
func (r *Restorer) restoreSecret(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string) (*corev1.Secret, error) {
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

func ownedBy(obj client.Object, uid types.UID) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

// Prepare makes sure the restore Secret names the snapshot of req with a
// URL that stays valid for a while (at least half of RestoreURLExpiry), and
// returns the snapshot's key. The snapshot is chosen once, when the Secret
// names none for req; later calls keep it, and read the store only to
// renew the URL. A snapshot that cannot be had is a problem whose Reason
// says why.
func (r *Restorer) Prepare(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string, req Request) (string, error) {
	if hcp.Spec.Etcd.Backup == nil {
		return "", problem(v1alpha1.BackupSecretInvalidReason, "spec.etcd.backup names no store to read the snapshot from")
	}
	secret, err := r.restoreSecret(ctx, hcp, cluster)
	if err != nil {
		return "", err
	}
	key := string(secret.Data[contract.EtcdRestoreKeyKey])
	if string(secret.Data[contract.EtcdRestoreIDKey]) != req.ID {
		key = "" // written for another restore
	}
	if expires, err := time.Parse(time.RFC3339, secret.Annotations[urlExpiresAnnotation]); key != "" && err == nil &&
		time.Until(expires) > RestoreURLExpiry/2 {
		return key, nil
	}
	st, err := r.open(ctx, r.apiReader, hcp, req.Folder)
	if err != nil {
		return "", err
	}
	defer st.close()
	if key == "" {
		key, err = st.resolve(ctx, r.apiReader, hcp, req.Snapshot)
	} else {
		// Chosen before, and still only while it may be read.
		err = st.permitKey(ctx, r.apiReader, hcp, key)
	}
	if err != nil {
		return "", err
	}
	expires := time.Now().Add(RestoreURLExpiry)
	u, err := st.objects.presign(ctx, key, RestoreURLExpiry)
	if err != nil {
		return "", err
	}
	data := map[string][]byte{contract.EtcdRestoreKeyKey: []byte(key), contract.EtcdRestoreURLKey: []byte(u)}
	if len(st.ca) > 0 {
		data[contract.EtcdRestoreCAKey] = st.ca
	}
	if req.ID != "" {
		data[contract.EtcdRestoreIDKey] = []byte(req.ID)
	}
	return key, r.writeRestoreSecret(ctx, hcp, cluster, data, expires)
}

// writeRestoreSecret creates or replaces the restore Secret.
func (r *Restorer) writeRestoreSecret(ctx context.Context, hcp *v1alpha1.HostedControlPlane, cluster string, data map[string][]byte, expires time.Time) error {
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
	if _, exists, err := s.objects.size(ctx, snapshot); err != nil || !exists {
		return "", cmp.Or(err, problem(v1alpha1.SnapshotNotFoundReason, "snapshot %s does not exist in the store of %s", snapshot, s.origin))
	}
	return snapshot, nil
}
