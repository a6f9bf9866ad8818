package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// ControlPlaneSettings is everything that describes a hosted control plane
// except its Kubernetes version. A HostedControlPlane carries it beside
// spec.version; a HostedControlPlaneTemplate carries it alone, because a
// ClusterClass takes the version from the Cluster's topology.
//
// Every object a ClusterClass's inline JSON patch may add into defaults to
// {} in the schema: an RFC 6902 "add" needs the parent of its path, so
// /spec/template/spec/apiServer/certSANs must find apiServer in a template
// that only sets a gateway. They are encoded even when empty, so that a
// typed round trip (the extension's patches) keeps what the API server
// stores. replicas has no schema default: Cluster API keeps a template's
// replicas over the topology's.
type ControlPlaneSettings struct {
	// replicas is the number of kube-apiserver pods. Scaling it through the
	// scale subresource is the same as setting it here. A HostedControlPlane
	// defaults it to 2. A template leaves it unset unless it means to fix it:
	// Cluster API keeps a template's value for the control plane of a
	// topology, over any ClusterClass patch.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Replicas *int32 `json:"replicas,omitempty"`

	// controlPlaneEndpoint is where workers and clients reach the API server.
	// Leave it empty and the controller fills it in from the gateway or the
	// exposure Service. Exposure type ClusterIP needs both host and port, as
	// you provide the route to the Service; with NodePort a host is the
	// address workers use (a management node's otherwise) and a port, within
	// 30000-32767, the node port to ask for. Once set, the host and the port
	// each never change; an unset one may still be filled in.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// gateway is a Gateway API Gateway with a TLS passthrough listener on a
	// wildcard hostname (for example *.k8s.example.com). The API server is then
	// served at <cluster>.<namespace>.<wildcard domain> and the konnectivity
	// server at konnectivity.<cluster>.<namespace>.<wildcard domain>, both
	// through TLSRoutes. Mutually exclusive with exposure.
	// +optional
	Gateway *GatewayReference `json:"gateway,omitempty"`

	// exposure chooses the Service that serves the API server when no gateway
	// is set. Defaults to a LoadBalancer Service.
	// +optional
	Exposure *Exposure `json:"exposure,omitempty"`

	// apiServer holds settings of the API server's identity.
	// +optional
	// +kubebuilder:default={}
	APIServer APIServerSettings `json:"apiServer,omitempty"`

	// deployment tunes the pods of the hosted control plane components.
	// +optional
	// +kubebuilder:default={}
	Deployment ComponentDeployments `json:"deployment,omitempty"`

	// etcd tunes the etcd cluster that stores the control plane's state.
	// +optional
	// +kubebuilder:default={}
	Etcd EtcdSpec `json:"etcd,omitempty"`

	// konnectivityClient tunes the konnectivity agents in the workload
	// cluster, through which the API server reaches nodes and pods.
	// +optional
	// +kubebuilder:default={}
	KonnectivityClient ScalablePod `json:"konnectivityClient,omitempty"`

	// coredns tunes the cluster DNS of the workload cluster.
	// +optional
	// +kubebuilder:default={}
	CoreDNS ScalablePod `json:"coredns,omitempty"`

	// kubeProxy tunes kube-proxy in the workload cluster, or turns it off for a
	// CNI that replaces it.
	// +optional
	// +kubebuilder:default={}
	KubeProxy KubeProxySpec `json:"kubeProxy,omitempty"`

	// certificates sets the lifetimes of the control plane's certificates.
	// +optional
	// +kubebuilder:default={}
	Certificates CertificatesSpec `json:"certificates,omitempty"`

	// oidcProviders are JSON Web Token issuers whose tokens the API server
	// accepts, keyed by issuer URL (https, as the token's iss claim has it).
	// They are rendered into the API server's structured
	// AuthenticationConfiguration (apiserver.config.k8s.io/v1), which the
	// API servers reload when it changes, without a restart. Each issuer
	// must serve its discovery document and keys to the API servers: their
	// network policy lets them reach the issuers' ports outside the
	// management cluster's API server and metadata addresses.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	OIDCProviders map[string]OIDCProvider `json:"oidcProviders,omitempty"`

	// serviceAccountIssuer is an issuer URL of the user's choice for the
	// workload cluster's service account tokens, for workload identity: a
	// cloud's identity federation trusts tokens whose iss claim names an
	// issuer it can discover. The API servers sign new tokens for it and
	// still accept those of the in-cluster issuer
	// (https://kubernetes.default.svc.<cluster domain>), and serve its
	// discovery document (/.well-known/openid-configuration, which names
	// <serviceAccountIssuer>/openid/v1/jwks as where the keys are) and its
	// keys (/openid/v1/jwks) to anyone, without credentials; nothing else
	// becomes anonymous. Serve those two paths at the issuer URL (the
	// control plane's endpoint, or a copy elsewhere). An https URL without
	// query, fragment or trailing slash; it cannot change or be removed
	// once set, since tokens signed for it would be refused.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ServiceAccountIssuer string `json:"serviceAccountIssuer,omitempty"`

	// managementServiceAccounts, when set, lets service accounts of the
	// management cluster reach the workload cluster's API server with a
	// token requested for it (kubectl create token <name> -n <namespace>
	// --audience=controlplane.cluster.x-k8s.io/<namespace of the
	// control plane>/<cluster>), so that platform automation needs no
	// kubeconfig of its own. Such a token's user is
	// management-cluster:system:serviceaccount:<namespace>:<name>, in the
	// group management-cluster:system:serviceaccounts:<namespace> (and
	// system:authenticated), with no permission until an RBAC binding in
	// the workload cluster grants one. Off unless set; setting or removing
	// it rolls the API servers, one at a time (a sidecar beside each serves
	// them the management cluster's public keys).
	// +optional
	ManagementServiceAccounts *ManagementServiceAccounts `json:"managementServiceAccounts,omitempty"`
}

// ManagementServiceAccounts are the service accounts of the management
// cluster whose tokens the workload cluster's API server accepts.
type ManagementServiceAccounts struct {
	// namespaces of the management cluster whose service accounts are
	// accepted; only the control plane's own namespace when empty. Tokens
	// of service accounts of any other namespace are refused, whatever
	// their audience.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`
}

// OIDCProvider is one JSON Web Token authenticator of the API server.
type OIDCProvider struct {
	// certificateAuthority is the PEM encoded CA bundle that verifies the
	// issuer's serving certificate; the system's roots when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	CertificateAuthority string `json:"certificateAuthority,omitempty"`

	// audiences a token must be issued to: its aud claim must hold at least
	// one of them.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=1024
	Audiences []string `json:"audiences"`

	// claimValidationRules are CEL expressions over the token's claims
	// (claims.<name>) that must all be true for a token to be accepted.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ClaimValidationRules []OIDCClaimValidationRule `json:"claimValidationRules,omitempty"`

	// claimMappings turn the token's claims into the user's attributes.
	// +required
	ClaimMappings OIDCClaimMappings `json:"claimMappings"`
}

// OIDCClaimValidationRule is a CEL expression a token's claims must meet.
type OIDCClaimValidationRule struct {
	// expression is a CEL expression that evaluates to a bool, such as
	// claims.email_verified == true.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`

	// message is what a refused token is told when expression is false.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// OIDCClaimMappings are CEL expressions that map a token's claims to the
// user's attributes.
type OIDCClaimMappings struct {
	// username is a CEL expression that evaluates to the user name, such as
	// claims.email or "oidc:" + claims.sub.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Username string `json:"username"`

	// groups is a CEL expression that evaluates to a string or a list of
	// strings, the user's groups, such as claims.groups.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Groups string `json:"groups,omitempty"`
}

// GatewayReference names a Gateway API Gateway.
type GatewayReference struct {
	// name of the Gateway.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// namespace of the Gateway.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// ExposureType is the kind of Service that serves the API server.
// +kubebuilder:validation:Enum=LoadBalancer;NodePort;ClusterIP
type ExposureType string

const (
	// ExposureLoadBalancer serves the API server through a LoadBalancer
	// Service; its address becomes the endpoint.
	ExposureLoadBalancer ExposureType = "LoadBalancer"
	// ExposureNodePort serves the API server on a node port of the management
	// cluster's nodes.
	ExposureNodePort ExposureType = "NodePort"
	// ExposureClusterIP serves the API server on a ClusterIP Service only; the
	// user routes traffic to it and sets spec.controlPlaneEndpoint.
	ExposureClusterIP ExposureType = "ClusterIP"
)

// Exposure chooses how the API server is served without a gateway.
type Exposure struct {
	// type of the Service: LoadBalancer (default), NodePort or ClusterIP.
	// +optional
	// +kubebuilder:default=LoadBalancer
	Type ExposureType `json:"type,omitempty"`
}

// APIServerSettings holds the API server's identity.
type APIServerSettings struct {
	// certSANs are extra DNS names or IP addresses in the API server's serving
	// certificate, for clients that reach it under another name.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	CertSANs []string `json:"certSANs,omitempty"`
}

// ComponentDeployments tunes the control plane component pods.
type ComponentDeployments struct {
	// apiServer tunes the kube-apiserver pods, and the konnectivity server
	// beside them. Their count is spec.replicas.
	// +optional
	// +kubebuilder:default={}
	APIServer APIServerPod `json:"apiServer,omitempty"`

	// controllerManager tunes the kube-controller-manager pods.
	// +optional
	// +kubebuilder:default={}
	ControllerManager ScalablePod `json:"controllerManager,omitempty"`

	// scheduler tunes the kube-scheduler pods.
	// +optional
	// +kubebuilder:default={}
	Scheduler ScalablePod `json:"scheduler,omitempty"`
}

// ImageSpec overrides parts of a container image reference; parts left empty
// keep the default for the control plane's version.
type ImageSpec struct {
	// registry, for example registry.k8s.io.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Registry *string `json:"registry,omitempty"`

	// repository within the registry, for example kube-apiserver.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Repository *string `json:"repository,omitempty"`

	// tag, for example v1.36.3.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Tag *string `json:"tag,omitempty"`
}

// Container tunes one container of a component.
type Container struct {
	// image overrides the container image.
	// +optional
	Image *ImageSpec `json:"image,omitempty"`

	// imagePullPolicy of the container.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy *corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// args are extra command-line flags, keyed by flag name without leading
	// dashes (for example {"v": "4"} for --v=4), at most 64, each value at
	// most 4096 characters. They override the controller's tuning flags; the
	// flags it must own (certificates, mounted files, addresses, cluster
	// membership) are refused.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Args map[string]string `json:"args,omitempty"`

	// resources of the container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// Pod tunes the pods of one component.
type Pod struct {
	Container `json:",inline"`

	// priorityClassName of the pods.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// ScalablePod tunes the pods of a component that runs several replicas.
type ScalablePod struct {
	Pod `json:",inline"`

	// replicas of the component. Unset, it is 2, but for the controller
	// manager and the scheduler 1 when spec.replicas (the API servers) is 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	Replicas *int32 `json:"replicas,omitempty"`
}

// APIServerPod tunes the kube-apiserver pods.
type APIServerPod struct {
	Pod `json:",inline"`

	// konnectivity tunes the konnectivity server container that runs beside
	// each kube-apiserver.
	// +optional
	// +kubebuilder:default={}
	Konnectivity Container `json:"konnectivity,omitempty"`

	// mounts are files of ConfigMaps or Secrets of the control plane's
	// namespace for the API server, keyed by volume name, each mounted
	// read-only at its path (an absolute directory outside those the
	// controller mounts) for the files args name, such as an authorization
	// webhook's kubeconfig, an admission control or a tracing
	// configuration. A change of their content rolls the API servers.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Mounts map[string]Mount `json:"mounts,omitempty"`

	// audit records the API server's requests by policy.
	// +optional
	Audit *Audit `json:"audit,omitempty"`
}

// Mount is a ConfigMap or a Secret mounted into the API server containers.
// +kubebuilder:validation:MinProperties=2
// +kubebuilder:validation:MaxProperties=2
type Mount struct {
	// path is the absolute directory the files appear in.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Path string `json:"path"`

	// configMap whose keys become the files; exactly one of configMap and
	// secret.
	// +optional
	ConfigMap *corev1.ConfigMapVolumeSource `json:"configMap,omitempty"`

	// secret whose keys become the files; exactly one of configMap and
	// secret.
	// +optional
	Secret *corev1.SecretVolumeSource `json:"secret,omitempty"`
}

// AuditMode is how the API server hands audit events to their backend.
// +kubebuilder:validation:Enum=batch;blocking;blocking-strict
type AuditMode string

// The audit modes, as kube-apiserver's --audit-log-mode and
// --audit-webhook-mode name them.
const (
	AuditBatch          AuditMode = "batch"
	AuditBlocking       AuditMode = "blocking"
	AuditBlockingStrict AuditMode = "blocking-strict"
)

// Audit records the API server's requests.
type Audit struct {
	// policy is the audit policy (audit.k8s.io/v1 Policy) that says which
	// requests are recorded at which level.
	// +required
	Policy auditv1.Policy `json:"policy"`

	// mode is how events reach their backend: batch (buffered, the
	// default), blocking (each request waits for its event) or
	// blocking-strict (a request whose event fails fails too).
	// +optional
	Mode *AuditMode `json:"mode,omitempty"`

	// webhook also sends the events to webhook targets, beside the API
	// server's standard output.
	// +optional
	Webhook *AuditWebhook `json:"webhook,omitempty"`
}

// AuditWebhook sends audit events to webhook targets. The API server posts
// to one target itself; with more, or when image, imagePullPolicy, args or
// resources are set, it posts to a forwarder beside it (tunnel audit of the
// tunnel image) that posts each batch to every target. image names a build
// of the tunnel image in full (registry, repository and tag); args are the
// forwarder's flags (timeout).
type AuditWebhook struct {
	Container `json:",inline"`

	// targets receive every event.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Targets []AuditWebhookTarget `json:"targets"`
}

// AuditWebhookTarget is a server that receives audit events.
type AuditWebhookTarget struct {
	// server is the https URL the events are posted to (as an
	// audit.k8s.io EventList).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	Server string `json:"server"`

	// certificateAuthority is the PEM encoded CA bundle that verifies the
	// server's certificate; the system's roots when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	CertificateAuthority string `json:"certificateAuthority,omitempty"`

	// authentication is the bearer token the events are posted with.
	// +optional
	Authentication *AuditWebhookAuthentication `json:"authentication,omitempty"`
}

// DefaultAuditTokenKey is the key of an audit webhook target's token when
// tokenKey is unset.
const DefaultAuditTokenKey = "token"

// AuditWebhookAuthentication names the Secret key that holds a bearer
// token.
type AuditWebhookAuthentication struct {
	// secretName is the Secret that holds the token.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`

	// secretNamespace of the Secret; the control plane's namespace when
	// unset. Another namespace is used only while a Gateway API
	// ReferenceGrant there allows HostedControlPlanes of this namespace to
	// use the Secret.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	SecretNamespace *string `json:"secretNamespace,omitempty"`

	// tokenKey is the key of the token in the Secret; token when unset
	// (DefaultAuditTokenKey).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	TokenKey *string `json:"tokenKey,omitempty"`
}

// KubeProxySpec tunes kube-proxy in the workload cluster.
type KubeProxySpec struct {
	Pod `json:",inline"`

	// disabled removes kube-proxy, for CNIs that replace it.
	// +optional
	Disabled *bool `json:"disabled,omitempty"`
}

// EtcdSpec tunes the hosted etcd cluster.
type EtcdSpec struct {
	Container `json:",inline"`

	// priorityClassName of the etcd pods.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// replicas is the number of etcd members: 1, 3 or 5. Lowering it removes
	// members and needs the annotation
	// controlplane.cluster.x-k8s.io/allow-etcd-scale-down: "true".
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Enum=1;3;5
	Replicas *int32 `json:"replicas,omitempty"`

	// storageClassName of the members' volumes; the cluster default when
	// unset. It cannot change once set.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClassName *string `json:"storageClassName,omitempty"`

	// volumeSize of each member's volume, 2Gi when unset, at least 1Gi and at most 1Ti.
	// It never goes below the volumes (status.etcd.volumeSize), and once set
	// it cannot be removed. Raised on a running etcd, the members' volume
	// claims grow in place when their StorageClass allows expansion
	// (otherwise the EtcdReady condition says so, and it can be put back to
	// status.etcd.volumeSize). etcd's backend quota (--quota-backend-bytes)
	// follows the smallest member's volume, once every one has grown, in a
	// rolling restart of the members, leaving the volume room for the write-ahead log and for
	// the second copy of the database that a defragmentation writes:
	// (volumeSize - volumeSize/16 - 512Mi) / 2, at least 128Mi and at most
	// 8Gi (reached from about 18Gi), so 704Mi for 2Gi and 3.5Gi for 8Gi.
	// args["quota-backend-bytes"] overrides it.
	// +optional
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty"`

	// autoGrow lets the controller grow the volumes as etcd fills them:
	// once a member's database (its dbSize) reaches 80% of its quota, every
	// member's volume grows by half, rounded up to a whole GiB, up to
	// maxVolumeSize, and the quota follows. Each growth waits until the one
	// before it is done (every volume grown and every member running the
	// quota it brought). The grown size lives on the volume claims:
	// volumeSize stays what the user set, and the volumes are the larger of
	// the two; status.etcd.volumeSize tells what they have. Growing the
	// volume does not raise a quota set in args, so autoGrow then does
	// nothing, nor does it beyond 8Gi of quota. Unset, it is on when
	// volumeSize is unset too (the volumes start at 2Gi and grow) and off
	// when volumeSize is set.
	// +optional
	AutoGrow *bool `json:"autoGrow,omitempty"`

	// maxVolumeSize is the most autoGrow grows each member's volume to, at
	// least volumeSize and at most 1Ti. Unset, 18Gi (or volumeSize when
	// larger): the smallest volume whose quota is etcd's suggested most of
	// 8Gi, beyond which growing raises the quota no further.
	// +optional
	MaxVolumeSize *resource.Quantity `json:"maxVolumeSize,omitempty"`

	// backup takes scheduled etcd snapshots into S3 compatible storage.
	// +optional
	Backup *EtcdBackup `json:"backup,omitempty"`

	// restore starts a new control plane's etcd from a snapshot in the store
	// of backup.secret (which it requires). It is set when the control plane
	// is created and cannot be added, changed or removed afterwards.
	// +optional
	Restore *EtcdRestore `json:"restore,omitempty"`
}

// LatestSnapshot restores the newest snapshot of a cluster's folder.
const LatestSnapshot = "latest"

// EtcdRestore names the snapshot a new control plane's etcd starts from.
type EtcdRestore struct {
	// snapshot is "latest", the newest snapshot of fromCluster's folder, or
	// an object key exactly as status.etcd.lastBackupKey shows it, such as
	// "ns/name/20260102T030405.000Z-rev1234.db".
	// +optional
	// +kubebuilder:default=latest
	// +kubebuilder:validation:MaxLength=1024
	Snapshot string `json:"snapshot,omitempty"`

	// fromCluster, "<namespace>/<name>", is the Cluster whose folder "latest"
	// looks in; this control plane's own Cluster when unset, as when a
	// Cluster is created again under the name it had. A Cluster of another
	// namespace is used only while a Gateway API ReferenceGrant there allows
	// HostedControlPlanes of this namespace to use it (kind Cluster, group
	// cluster.x-k8s.io); so is a snapshot key in its folder.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	FromCluster string `json:"fromCluster,omitempty"`
}

// EtcdBackup schedules etcd snapshots into S3 compatible storage.
type EtcdBackup struct {
	// schedule in cron format (five fields, or a descriptor such as @daily),
	// in UTC unless it starts with CRON_TZ=<IANA time zone>, for example
	// "CRON_TZ=Europe/Berlin 0 3 * * *".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Schedule string `json:"schedule"`

	// retentionCount is how many of the newest snapshots are kept; older ones
	// are deleted after each backup.
	// +optional
	// +kubebuilder:default=7
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	RetentionCount *int32 `json:"retentionCount,omitempty"`

	// Admission, not the schema, requires secret and its name: a typed client
	// sends an empty name, which the schema would call too short instead of
	// missing.

	// secret holds the S3 endpoint, bucket and credentials; required.
	// +optional
	Secret EtcdBackupSecret `json:"secret,omitempty,omitzero"`
}

// EtcdBackupSecret names the Secret with the S3 settings and its keys.
type EtcdBackupSecret struct {
	// name of the Secret; required.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// namespace of the Secret; the control plane's namespace when unset.
	// Another namespace is used only while a Gateway API ReferenceGrant
	// there allows HostedControlPlanes of this namespace to use the Secret.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace *string `json:"namespace,omitempty"`

	// accessKeyIDKey is the key of the access key ID.
	// +optional
	// +kubebuilder:default=accessKeyID
	AccessKeyIDKey *string `json:"accessKeyIDKey,omitempty"`

	// secretAccessKeyKey is the key of the secret access key.
	// +optional
	// +kubebuilder:default=secretAccessKey
	SecretAccessKeyKey *string `json:"secretAccessKeyKey,omitempty"`

	// hostKey is the key of the S3 endpoint host, such as s3.example.com or
	// s3.example.com:9000, without scheme or path.
	// +optional
	// +kubebuilder:default=host
	HostKey *string `json:"hostKey,omitempty"`

	// regionKey is the key of the S3 region.
	// +optional
	// +kubebuilder:default=region
	RegionKey *string `json:"regionKey,omitempty"`

	// bucketKey is the key of the bucket; text after the first "/" is a
	// prefix for the snapshot objects.
	// +optional
	// +kubebuilder:default=bucket
	BucketKey *string `json:"bucketKey,omitempty"`

	// caKey is the key of the PEM encoded CA that signs the endpoint's
	// serving certificate; when the Secret has no such key, the system's
	// roots are trusted.
	// +optional
	// +kubebuilder:default=ca.crt
	CAKey *string `json:"caKey,omitempty"`
}

// CertificatesSpec sets the lifetimes of the control plane's certificates.
// cert-manager renews each one when two thirds of its lifetime have passed.
type CertificatesSpec struct {
	// rootCaCertificateDuration is the lifetime of the cluster CA, the root
	// that signs the etcd and front-proxy CAs. At least 24h, and at least
	// caCertificateDuration. Default 87600h (ten years).
	// +optional
	RootCACertificateDuration *metav1.Duration `json:"rootCaCertificateDuration,omitempty"`

	// caCertificateDuration is the lifetime of the etcd and front-proxy
	// certificate authorities. At least 24h. Default 43800h (five years).
	// +optional
	CACertificateDuration *metav1.Duration `json:"caCertificateDuration,omitempty"`

	// leafCertificateDuration is the lifetime of every other certificate of
	// the control plane (serving and client certificates of etcd, the API
	// servers, the controllers and konnectivity) but the admin's. From 1h
	// to 8760h (a year), and at most the lifetimes of the authorities.
	// Default 8760h, or the shortest authority lifetime when that is less.
	// +optional
	LeafCertificateDuration *metav1.Duration `json:"leafCertificateDuration,omitempty"`

	// kubeconfigCertificateDuration is the lifetime of the admin client
	// certificate that <cluster>-kubeconfig embeds: it leaves the management
	// cluster, so it is short. From 1h to 8760h, and at most
	// rootCaCertificateDuration. Default 24h.
	// +optional
	KubeconfigCertificateDuration *metav1.Duration `json:"kubeconfigCertificateDuration,omitempty"`
}
