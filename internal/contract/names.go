package contract

// Names of the objects a hosted control plane owns that another party reads.
// They derive from the Cluster's name, as Cluster API's own secret names do.

// EtcdName is the name of the etcd StatefulSet and of its client Service.
func EtcdName(cluster string) string { return cluster + "-etcd" }

// EtcdPeerServiceName is the headless Service that gives each etcd member
// its DNS name.
func EtcdPeerServiceName(cluster string) string { return cluster + "-etcd-peer" }

// EtcdHealthcheckSecretName is the Secret (tls.crt, tls.key, ca.crt) with the
// client certificate used to query etcd's health.
func EtcdHealthcheckSecretName(cluster string) string { return cluster + "-etcd-healthcheck-client" }

// EtcdTrustSecretName is the Secret (ca.crt) with the certificates of the
// old and the new etcd CA while a rotation of it needs both trusted; it
// exists only then, and every client of etcd trusts it instead of the ca.crt
// of its client certificate's Secret while it does.
func EtcdTrustSecretName(cluster string) string { return cluster + "-etcd-trust" }

// EtcdServerName is the DNS name every etcd serving certificate carries, so
// that a client dialling a member by address can still verify it.
func EtcdServerName(cluster, namespace string) string {
	return EtcdName(cluster) + "." + namespace + ".svc"
}

// APIServerServiceName is the Service in front of the API server pods, which
// the exposure serves and the TLSRoutes point at.
func APIServerServiceName(cluster string) string { return cluster + "-apiserver" }

// ClusterKubeconfigName is Cluster API's kubeconfig Secret of a cluster.
func ClusterKubeconfigName(cluster string) string { return cluster + "-kubeconfig" }

// EtcdClientPort is etcd's client port, named "client" on its Services.
const (
	EtcdClientPort     = 2379
	EtcdClientPortName = "client"
)

// Ports of the API server and the konnectivity server beside it.
const (
	APIServerPort    = 6443
	KonnectivityPort = 8132
)

// EncryptionSecretName is the Secret that holds the EncryptionConfiguration
// (apiserver.config.k8s.io/v1) the API servers encrypt the workload
// cluster's Secrets with, under EncryptionConfigKey. It outlives the control
// plane while snapshots of its etcd may exist, which only its keys decrypt,
// and a control plane of the same name adopts it.
func EncryptionSecretName(cluster string) string { return cluster + "-encryption" }

// EncryptionConfigKey is the key of the EncryptionConfiguration in the
// Secret EncryptionSecretName names.
const EncryptionConfigKey = "encryption-config.yaml"
