package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// AllowEtcdScaleDownAnnotation, set to "true" on a HostedControlPlane, is the
// explicit consent to lower spec.etcd.replicas, which removes etcd members.
const AllowEtcdScaleDownAnnotation = "controlplane.cluster.x-k8s.io/allow-etcd-scale-down"

// BackupNowAnnotation, set on a HostedControlPlane with spec.etcd.backup (to
// any value), asks for one etcd snapshot now, outside the schedule. The
// controller removes it once the snapshot is stored.
const BackupNowAnnotation = "controlplane.cluster.x-k8s.io/backup-now"

// RestoreEtcdAnnotation, set on a running HostedControlPlane with
// spec.etcd.backup to "latest" or to a snapshot's key as
// status.etcd.lastBackupKey shows it, asks for its etcd to be restored in
// place from that snapshot (of the control plane's own Cluster's folder for
// "latest"): the API servers, controller-manager and scheduler stop, every
// etcd member stops and restores the snapshot, and they start again.
// Everything written after the snapshot is lost. The controller removes the
// annotation once it took the request (status.etcd.restoring).
const RestoreEtcdAnnotation = "controlplane.cluster.x-k8s.io/restore-etcd"

// EncryptionKeyKeptAnnotation marks the Secret <cluster>-encryption that the
// controller kept when it deleted a control plane whose etcd snapshots may
// be in a store: they hold the workload cluster's Secrets encrypted with its
// keys, so a restore needs it. Its value names the control plane. A control
// plane of the same name adopts the Secret, and the annotation goes.
const EncryptionKeyKeptAnnotation = "controlplane.cluster.x-k8s.io/encryption-key-kept"

// EncryptionRotationAnnotation on the Secret <cluster>-encryption records a
// rotation of its keys under way, as status.encryption.rotation shows it
// (in JSON): the controller writes it with the keys of each phase, in one
// update, so that the keys the API servers read and the phase never
// disagree.
const EncryptionRotationAnnotation = "controlplane.cluster.x-k8s.io/encryption-rotation"

// RotateAnnotation, set on a HostedControlPlane to a comma-separated list
// of keys, asks for each to be rotated: service-account-key (the key that
// signs service account tokens), encryption-key (the key that encrypts
// the workload cluster's Secrets in etcd), etcd-ca (the CA etcd members and
// their clients trust), front-proxy-ca (the CA the API servers trust for
// the front proxy's client certificate) and cluster-ca (the CA of the API
// servers' clients, their serving certificate and the kubelets); or
// emergency, after a suspected leak, for all of them but the cluster CA at
// once. A rotation goes through phases that keep every client working (see
// the README); status says which phase each is in and since when. The
// controller removes the annotation once it took the request; asking for a
// key whose rotation is under way changes nothing.
const RotateAnnotation = "controlplane.cluster.x-k8s.io/rotate"

// DropOldServiceAccountKeyAnnotation, set to "true" on a
// HostedControlPlane, ends the wait of a rotation of the service account
// key for the old key's tokens to expire (WaitingForOldTokens) as soon as
// the rotation reaches it: the old key is dropped then, and every token it
// signed is refused once the API servers rolled, pods' tokens the kubelet
// has not replaced yet included (see the README). The controller removes
// the annotation once the rotation dropped the old key, or at once, with a
// Warning event, when no rotation of the service account key is under way
// or asked for.
const DropOldServiceAccountKeyAnnotation = "controlplane.cluster.x-k8s.io/drop-old-service-account-key"

// The keys RotateAnnotation names.
const (
	RotateServiceAccountKey = "service-account-key"
	RotateEncryptionKey     = "encryption-key"
	RotateEtcdCA            = "etcd-ca"
	RotateFrontProxyCA      = "front-proxy-ca"
	// RotateEmergency names every key above: each rotation runs at once,
	// side by side, every phase moving on as soon as what it waits for is
	// observed.
	RotateEmergency = "emergency"
	// RotateClusterCA is the cluster CA, which emergency does not name: a
	// rotation of it also rotates the etcd and front proxy CAs while they
	// are still intermediates it signed, and drops the old cluster CA only
	// once none is.
	RotateClusterCA = "cluster-ca"
)

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=hostedcontrolplanes,scope=Namespaced,categories=cluster-api,shortName=hcp
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=control-plane-hosted-control-plane"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`,description="Cluster this control plane belongs to"
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`,description="The API server answers through the cluster's kubeconfig"
// +kubebuilder:printcolumn:name="Failing",type=string,JSONPath=`.status.failing.type`,description="The first condition that is false (Available first, then by name; Paused, false while not paused, never); empty when none is"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.failing.reason`,description="Why that condition is false"
// +kubebuilder:printcolumn:name="Initialized",type=boolean,JSONPath=`.status.initialization.controlPlaneInitialized`,description="The API server has answered at least once"
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.controlPlaneEndpoint.host`,description="Where workers reach the API server"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`,description="Desired API server replicas"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`,description="Ready API server replicas"
// +kubebuilder:printcolumn:name="Up-to-date",type=integer,JSONPath=`.status.upToDateReplicas`,description="API server replicas with the desired spec",priority=1
// +kubebuilder:printcolumn:name="Etcd",type=integer,JSONPath=`.spec.etcd.replicas`,description="Desired etcd members",priority=1
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`,description="Desired Kubernetes version"
// +kubebuilder:printcolumn:name="Etcd DB",type=string,JSONPath=`.status.etcd.volumeUsage`,description="The largest etcd database a member reports",priority=1
// +kubebuilder:printcolumn:name="Etcd volume",type=string,JSONPath=`.status.etcd.volumeSize`,description="The smallest volume an etcd member has",priority=1
// +kubebuilder:printcolumn:name="Last backup",type=date,JSONPath=`.status.etcd.lastBackupTime`,description="When the last etcd snapshot was stored",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// HostedControlPlane is a Kubernetes control plane whose components run as
// pods in the management cluster, for the Cluster API Cluster that refers to
// it through spec.controlPlaneRef.
type HostedControlPlane struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired control plane.
	// +required
	Spec HostedControlPlaneSpec `json:"spec"`

	// status is the observed control plane.
	// +optional
	Status HostedControlPlaneStatus `json:"status,omitempty,omitzero"`
}

// HostedControlPlaneSpec is the desired state of a HostedControlPlane.
type HostedControlPlaneSpec struct {
	// version is the Kubernetes version of the control plane, a semantic
	// version such as v1.36.3 (a missing "v" is added) from v1.31.x to
	// v1.36.x, pre-releases included, without build metadata. It may move up
	// one minor version at a time and never down.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version"`

	// rollout says when the control plane takes what a newer release of the
	// controller renders differently, which otherwise waits for the next
	// change of this spec (see status.rollout).
	// +optional
	Rollout Rollout `json:"rollout,omitempty,omitzero"`

	ControlPlaneSettings `json:",inline"`
}

// Rollout asks for a rollout, as KubeadmControlPlane's spec.rollout does.
type Rollout struct {
	// after, once reached, rolls every pod of the control plane and of its
	// workload cluster's add-ons started before it, with what the running
	// release of the controller renders. A time in the future waits until
	// then; setting it changes nothing else.
	// +optional
	After metav1.Time `json:"after,omitempty,omitzero"`
}

// HostedControlPlaneStatus is the observed state of a HostedControlPlane, as
// the Cluster API v1beta2 control plane contract defines it.
type HostedControlPlaneStatus struct {
	// conditions say what is ready and, when something is not, what is missing.
	// The Available condition is true while the API server answers.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// failing is the first condition that is false (Available first, then
	// the others by name, as conditions are ordered) and its reason, for
	// kubectl get hcp; absent when none is. Paused, false while the control
	// plane is not paused, is never failing.
	// +optional
	Failing *FailingCondition `json:"failing,omitempty"`

	// initialization tells Cluster API when the control plane first answered.
	// +optional
	Initialization HostedControlPlaneInitializationStatus `json:"initialization,omitempty,omitzero"`

	// selector selects the API server pods, for the scale subresource.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Selector string `json:"selector,omitempty"`

	// replicas is the number of API server pods.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of API server pods that are ready.
	// +optional
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`

	// availableReplicas is the number of API server pods that are available.
	// +optional
	AvailableReplicas *int32 `json:"availableReplicas,omitempty"`

	// upToDateReplicas is the number of API server pods with the desired spec.
	// +optional
	UpToDateReplicas *int32 `json:"upToDateReplicas,omitempty"`

	// versions are the Kubernetes versions the API server pods run, oldest
	// first. A version appears only once a pod really runs it.
	// +optional
	// +listType=map
	// +listMapKey=version
	// +kubebuilder:validation:MaxItems=100
	Versions []clusterv1.StatusVersion `json:"versions,omitempty"`

	// version is the oldest Kubernetes version an API server pod runs.
	//
	// Deprecated: use versions; kept for the v1beta1 contract.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version,omitempty"`

	// externalManagedControlPlane is always true: the control plane has no
	// Nodes in the workload cluster.
	// +optional
	ExternalManagedControlPlane *bool `json:"externalManagedControlPlane,omitempty"`

	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// etcd reports the hosted etcd cluster.
	// +optional
	Etcd EtcdStatus `json:"etcd,omitempty,omitzero"`

	// encryption reports encryption at rest of the workload cluster's
	// Secrets; the EncryptionReady condition says how far it is.
	// +optional
	Encryption EncryptionStatus `json:"encryption,omitempty,omitzero"`

	// serviceAccountKey reports the key that signs the workload cluster's
	// service account tokens; the ServiceAccountKeyReady condition says how
	// far a rotation is.
	// +optional
	ServiceAccountKey ServiceAccountKeyStatus `json:"serviceAccountKey,omitempty,omitzero"`

	// certificateAuthorities reports the certificate authorities the
	// control plane rotates by itself; the EtcdCAReady and
	// FrontProxyCAReady conditions say how far a rotation is.
	// +optional
	CertificateAuthorities CertificateAuthoritiesStatus `json:"certificateAuthorities,omitempty,omitzero"`

	// rollout reports what a newer release of the controller renders
	// differently from what runs, held until the next rollout the user
	// starts.
	// +optional
	Rollout RolloutStatus `json:"rollout,omitempty,omitzero"`
}

// FailingCondition names a condition that is false, and why.
type FailingCondition struct {
	// type of the condition, such as EtcdReady.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	Type string `json:"type"`

	// reason the condition gives, such as EtcdRolloutStuck.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}

// RolloutStatus reports the rendering a newer release of the controller
// holds back: an upgrade of the controller restarts no pod, and what it
// renders differently for a workload waits for the next change of the spec,
// spec.rollout.after, or, for a change the release marks as one that must
// roll, this control plane's turn across the fleet.
type RolloutStatus struct {
	// pending are the workloads whose pods the running release renders
	// differently.
	// +optional
	// +listType=map
	// +listMapKey=object
	// +kubebuilder:validation:MaxItems=32
	Pending []PendingRollout `json:"pending,omitempty"`
}

// PendingRollout is one workload whose new rendering is held back.
type PendingRollout struct {
	// object is the workload: its kind and name, and for one in the workload
	// cluster its namespace (such as "DaemonSet kube-system/kube-proxy").
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Object string `json:"object"`

	// changes are the fields of the pod template the new rendering changes,
	// such as spec.containers[kube-apiserver].args.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=512
	Changes []string `json:"changes,omitempty"`

	// mustRoll is set when the release marks the change as one that must
	// roll (a security fix): it rolls when the fleet's turn comes to this
	// control plane, one control plane at a time.
	// +optional
	MustRoll bool `json:"mustRoll,omitempty"`

	// renderedBy and templateHash identify the held rendering (the release
	// and settings of the controller, and the digest of the pod template),
	// so that a change of what the pods depend on while it is held, which
	// rolls them anyway, brings it along.
	// +required
	// +kubebuilder:validation:MaxLength=256
	RenderedBy string `json:"renderedBy"`
	// +required
	// +kubebuilder:validation:MaxLength=64
	TemplateHash string `json:"templateHash"`
}

// EncryptionStatus reports encryption at rest of the workload cluster's
// Secrets by its API servers, with the keys in the Secret
// <cluster>-encryption. It names keys, never their values.
type EncryptionStatus struct {
	// provider encrypts the Secrets the API servers write: secretbox, or
	// the provider of a configuration a user kept in the Secret.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Provider string `json:"provider,omitempty"`

	// key names the key the API servers write Secrets with.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`

	// rewrittenWith names the key of the last rewrite of every Secret: the
	// API servers wrote again, with that key, each one stored before it
	// took over (in clear, or under another key). While it differs from
	// key, a rewrite is under way.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RewrittenWith string `json:"rewrittenWith,omitempty"`

	// rewrittenAfter is the restore in place (status.etcd.restoredFrom.id)
	// that the last rewrite followed: a snapshot may bring back Secrets
	// stored in clear, so each restore in place is followed by a rewrite.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	RewrittenAfter string `json:"rewrittenAfter,omitempty"`

	// rotation is the rotation of the key under way, which the rotate
	// annotation asked for.
	// +optional
	Rotation *KeyRotation `json:"rotation,omitempty"`

	// rotatedAt is when the last rotation of the key ended.
	// +optional
	RotatedAt *metav1.Time `json:"rotatedAt,omitempty"`
}

// ServiceAccountKeyStatus reports the key that signs service account
// tokens, kept in the Secret <cluster>-sa, and a rotation of it, whose new
// key is kept in <cluster>-sa-next until it replaces the old one.
type ServiceAccountKeyStatus struct {
	// rotation is the rotation under way, which the rotate annotation asked
	// for.
	// +optional
	Rotation *KeyRotation `json:"rotation,omitempty"`

	// rotatedAt is when the last rotation ended: since then, only the new
	// key verifies tokens.
	// +optional
	RotatedAt *metav1.Time `json:"rotatedAt,omitempty"`
}

// CertificateAuthoritiesStatus reports the certificate authorities the
// control plane rotates by itself.
type CertificateAuthoritiesStatus struct {
	// etcd is the CA of etcd (the Secret <cluster>-etcd): etcd's members
	// and their clients (the API servers, the controller) trust it alone.
	// +optional
	Etcd CertificateAuthorityStatus `json:"etcd,omitempty,omitzero"`

	// frontProxy is the CA of the front proxy (the Secret <cluster>-proxy):
	// the API servers trust it alone for the client certificate they
	// present to extension API servers.
	// +optional
	FrontProxy CertificateAuthorityStatus `json:"frontProxy,omitempty,omitzero"`

	// cluster is the cluster CA (the Secret <cluster>-ca): the API servers
	// trust it alone for client certificates, kubeconfigs and
	// kube-public/cluster-info carry it alone. Once rotated, the API
	// server's serving certificate and the certificates presented to
	// kubelets are issued by the Secret <cluster>-ca-cross: the same key,
	// cross-signed by the CA before, so that joined workers, which trust
	// only the CA they joined with, keep verifying them.
	// +optional
	Cluster CertificateAuthorityStatus `json:"cluster,omitempty,omitzero"`
}

// CertificateAuthorityStatus reports a certificate authority and a
// rotation of it, whose new CA is kept in the Secret <secret>-next until it
// replaces the old one.
type CertificateAuthorityStatus struct {
	// rotation is the rotation under way, which the rotate annotation asked
	// for.
	// +optional
	Rotation *KeyRotation `json:"rotation,omitempty"`

	// rotatedAt is when the last rotation ended: since then, the CA is a
	// root of its own (self-signed), and only it is trusted.
	// +optional
	RotatedAt *metav1.Time `json:"rotatedAt,omitempty"`

	// trustSecret (the etcd CA's alone) tells that what verifies the CA's
	// certificates reads the Secret <cluster>-etcd-trust, which holds the
	// CA of <cluster>-etcd, rather than the ca.crt beside its own
	// certificate: set when a cross-signed rotation ended (see
	// KeyRotation's crossSigned).
	// +optional
	TrustSecret bool `json:"trustSecret,omitempty"`
}

// KeyRotation is a rotation of a key under way: which phase it is in and
// since when.
type KeyRotation struct {
	// phase is the phase the rotation is in; the key's condition has it as
	// its reason.
	// +required
	Phase RotationPhase `json:"phase"`

	// since is when the rotation entered the phase.
	// +required
	Since metav1.Time `json:"since"`

	// startedAt is when the rotation was asked for.
	// +required
	StartedAt metav1.Time `json:"startedAt"`

	// key names the new key, for keys that have names (the encryption
	// key's, as etcd's stored values name it).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`

	// renewedNodes (a rotation of the cluster CA alone) are the workload
	// cluster's nodes whose kubelet was seen with a client certificate of
	// the new CA (the certificate of a kubelet client CertificateSigningRequest
	// the controller manager signed with it), kept here because the
	// workload cluster removes such requests an hour after they were
	// issued. WaitingForKubelets ends once every node is among them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=253
	RenewedNodes []string `json:"renewedNodes,omitempty"`

	// crossSigned (a rotation of the etcd CA) tells that the new CA is
	// cross-signed by the old one (the Secret <cluster>-etcd-cross):
	// certificates are issued through that until nothing trusts the old CA
	// any more, so that etcd's members restart once, to trust the new CA
	// alone, instead of twice. A rotation started by an earlier release
	// has it unset and ends as it began.
	// +optional
	CrossSigned bool `json:"crossSigned,omitempty"`
}

// RotationPhase is a phase of a key rotation.
// +kubebuilder:validation:Enum=TrustingNewKey;SigningWithNewKey;WaitingForOldTokens;DroppingOldKey;DecryptingWithNewKey;EncryptingWithNewKey;TrustingNewCA;IssuingFromNewCA;WaitingForKubelets;DroppingOldCA
type RotationPhase string

// The phases of a rotation of the service account key, in order.
const (
	// TrustingNewKey: the API servers roll to verify tokens signed by the
	// old key or the new one; they still sign with the old.
	TrustingNewKey RotationPhase = "TrustingNewKey"
	// SigningWithNewKey: every API server trusts both keys; they and the
	// controller manager roll to sign with the new one.
	SigningWithNewKey RotationPhase = "SigningWithNewKey"
	// WaitingForOldTokens: nothing signs with the old key any more; it is
	// still trusted until every token it signed has expired.
	WaitingForOldTokens RotationPhase = "WaitingForOldTokens"
	// DroppingOldKey: the new key replaces the old one in its Secret, and
	// the API servers roll to trust it alone.
	DroppingOldKey RotationPhase = "DroppingOldKey"
)

// The phases of a rotation of the encryption key, in order; the last is
// DroppingOldKey.
const (
	// DecryptingWithNewKey: the API servers roll to decrypt with the new key
	// as well; they still encrypt with the old.
	DecryptingWithNewKey RotationPhase = "DecryptingWithNewKey"
	// EncryptingWithNewKey: every API server decrypts with both keys; they
	// roll to encrypt with the new one, and every Secret is then rewritten
	// with it.
	EncryptingWithNewKey RotationPhase = "EncryptingWithNewKey"
)

// The phases of a rotation of a certificate authority (etcd's, the front
// proxy's, the cluster CA), in order.
const (
	// TrustingNewCA: a new CA is issued, and everything that verifies
	// certificates of the CA rolls to trust the old and the new one; every
	// certificate is still issued by the old. Of the etcd CA (crossSigned),
	// the new CA is cross-signed by the old one instead, and nothing rolls.
	TrustingNewCA RotationPhase = "TrustingNewCA"
	// IssuingFromNewCA: everything trusts both; every certificate of the CA
	// is issued again by the new one, and what presents them takes them up:
	// etcd's members at their next connections, the other pods by a roll.
	// Of the etcd CA (crossSigned), they are issued through the
	// cross-signed new CA, which what trusts the old one verifies.
	IssuingFromNewCA RotationPhase = "IssuingFromNewCA"
	// WaitingForKubelets (the cluster CA's alone): every certificate of the
	// control plane is issued by the new CA and the controller manager
	// signs the kubelets' client certificates with it; the API servers
	// still trust the old one until every node's kubelet was seen renewing
	// its own (renewedNodes), or until the longest lifetime of one has
	// passed.
	WaitingForKubelets RotationPhase = "WaitingForKubelets"
	// DroppingOldCA: nothing presents a certificate of the old CA any more;
	// the new CA replaces it in its Secret, and everything rolls to trust
	// it alone.
	DroppingOldCA RotationPhase = "DroppingOldCA"
)

// HostedControlPlaneInitializationStatus is the initialization part of the
// control plane contract.
type HostedControlPlaneInitializationStatus struct {
	// controlPlaneInitialized is true once the API server has answered.
	// +optional
	ControlPlaneInitialized *bool `json:"controlPlaneInitialized,omitempty"`
}

// EtcdStatus reports the hosted etcd cluster.
type EtcdStatus struct {
	// members are the names of the members etcd's member list holds,
	// voters and learners, answering or not (while etcd does not answer,
	// those it last listed, or those it is founded with); admission keeps
	// spec.etcd.replicas from going below their count without consent.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	Members []string `json:"members,omitempty"`

	// memberStatuses say, for each member etcd reports, its ID, whether it
	// votes or learns and whether it answers with a leader, as the
	// controller last observed.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	MemberStatuses []EtcdMemberStatus `json:"memberStatuses,omitempty"`

	// volumeSize is the smallest capacity a member's bound volume has.
	// +optional
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty"`

	// volumeUsage is the largest database file a member reports (etcd's
	// dbSize, including the free pages a defragmentation would return), as
	// last observed and rounded up to a whole MiB: what counts against the
	// backend quota. The write-ahead
	// log and snapshot files beside it on the volume, for which the quota
	// leaves room, are not counted.
	// +optional
	VolumeUsage *resource.Quantity `json:"volumeUsage,omitempty"`

	// lastBackupTime is when the last snapshot that was stored and verified
	// began: the point in time its data reflects.
	// +optional
	LastBackupTime *metav1.Time `json:"lastBackupTime,omitempty"`

	// lastBackupKey is the object key of the last snapshot in the bucket.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LastBackupKey string `json:"lastBackupKey,omitempty"`

	// lastBackupSize is the size of the last snapshot.
	// +optional
	LastBackupSize *resource.Quantity `json:"lastBackupSize,omitempty"`

	// nextBackupTime is when the next scheduled snapshot is due.
	// +optional
	NextBackupTime *metav1.Time `json:"nextBackupTime,omitempty"`

	// restoredFrom is the snapshot etcd was last restored from, by
	// spec.etcd.restore or in place, once etcd answered.
	// +optional
	RestoredFrom *EtcdRestoredFrom `json:"restoredFrom,omitempty"`

	// restoring is the restore in place under way, which the restore-etcd
	// annotation asked for; EtcdRestored says how far it is.
	// +optional
	Restoring *EtcdRestoring `json:"restoring,omitempty"`
}

// EtcdRestoring is a restore in place under way.
type EtcdRestoring struct {
	// id names this restore: when it was asked for, in UTC.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id"`

	// key is the object key of the snapshot every member restores.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Key string `json:"key"`
}

// EtcdRestoredFrom is the snapshot an etcd was restored from.
type EtcdRestoredFrom struct {
	// key is the snapshot's object key.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Key string `json:"key"`

	// revision is the etcd revision the snapshot holds; restored revisions
	// are bumped beyond it, so clients never see them go backwards.
	// +required
	Revision int64 `json:"revision"`

	// id is the restore in place that restored it (status.etcd.restoring's
	// id); empty for spec.etcd.restore.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id,omitempty"`
}

// EtcdMemberRole is whether an etcd member votes or only learns.
// +kubebuilder:validation:Enum=Voter;Learner
type EtcdMemberRole string

// The roles of an etcd member.
const (
	EtcdVoter   EtcdMemberRole = "Voter"
	EtcdLearner EtcdMemberRole = "Learner"
)

// EtcdMemberStatus is one etcd member as etcd reports it.
type EtcdMemberStatus struct {
	// name is the pod the member runs in.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// id is the member's ID in hexadecimal, as etcdctl prints it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16
	ID string `json:"id"`

	// role is Voter, or Learner while a new member catches up.
	// +required
	Role EtcdMemberRole `json:"role"`

	// healthy is true when the member answered and knows a leader.
	// +required
	Healthy bool `json:"healthy"`
}

// +kubebuilder:object:root=true

// HostedControlPlaneList is a list of HostedControlPlanes.
type HostedControlPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostedControlPlane `json:"items"`
}

// GetConditions returns the control plane's conditions, for Cluster API's
// condition helpers.
func (c *HostedControlPlane) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the control plane's conditions, for Cluster API's
// condition helpers.
func (c *HostedControlPlane) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}
