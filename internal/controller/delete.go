package controller

import (
	"context"
	"fmt"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/backup"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// reconcileDelete closes the connections to the control plane's etcd and
// removes what garbage collection cannot: the Secrets cert-manager issued,
// once the final etcd snapshot is stored or given up on (see
// internal/backup), and the encryption Secret, unless snapshots may exist:
// they hold the workload cluster's Secrets encrypted with its keys, so it is
// kept for a restore. Certificates go first, or cert-manager would issue
// them again. Everything else is owned by the control plane and goes with it
// once the finalizer is released.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	if controllerutil.ContainsFinalizer(s.hcp, backup.Finalizer) {
		// The final etcd snapshot needs etcd's client certificate; the
		// backup controller's removal of its finalizer brings us back.
		return ctrl.Result{}, nil
	}
	r.etcd.Forget(types.NamespacedName{Namespace: s.hcp.Namespace, Name: s.cluster.Name})
	r.probes.Forget(client.ObjectKeyFromObject(s.hcp))
	r.etcdAnswers.Forget(client.ObjectKeyFromObject(s.hcp))
	r.etcdPresented.Forget(client.ObjectKeyFromObject(s.hcp))
	mine := []client.ListOption{client.InNamespace(s.hcp.Namespace), client.MatchingLabels{contract.ControlPlaneLabel: s.hcp.Name}}

	certs := &cmv1.CertificateList{}
	err := r.client.List(ctx, certs, mine...)
	if err != nil && !apimeta.IsNoMatchError(err) {
		return ctrl.Result{}, fmt.Errorf("list certificates: %w", err)
	}
	for i := range certs.Items {
		if err := r.client.Delete(ctx, &certs.Items[i]); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete certificate %s: %w", certs.Items[i].Name, err)
		}
	}
	if len(certs.Items) > 0 {
		return ctrl.Result{RequeueAfter: retryInterval}, nil // the deletes above bring us back sooner
	}

	secrets := &corev1.SecretList{}
	if err := r.client.List(ctx, secrets, mine...); err != nil {
		return ctrl.Result{}, fmt.Errorf("list secrets: %w", err)
	}
	for i := range secrets.Items {
		secret := &secrets.Items[i]
		if metav1.GetControllerOfNoCopy(secret) != nil {
			continue // owned: garbage collection takes it
		}
		if secret.Name == contract.EncryptionSecretName(s.cluster.Name) && snapshotsMayExist(s.hcp) {
			if err := r.keepEncryptionSecret(ctx, s.hcp, secret); err != nil {
				return ctrl.Result{}, err
			}
			continue
		}
		if err := r.client.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete secret %s: %w", secret.Name, err)
		}
	}
	controllerutil.RemoveFinalizer(s.hcp, Finalizer)
	r.told.forget(s.hcp.UID, "")
	r.rewrites.forget(s.hcp.UID)
	expiry.set(types.NamespacedName{Namespace: s.hcp.Namespace, Name: s.hcp.Name}, nil)
	return ctrl.Result{}, nil
}
