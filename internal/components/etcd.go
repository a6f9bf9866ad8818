package components

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// Etcd ports beside the client port.
const (
	etcdPeerPort    = 2380
	etcdMetricsPort = 2381
)

// DefaultEtcdVolumeSize is each member's volume unless the spec sets one.
var DefaultEtcdVolumeSize = resource.MustParse("2Gi")

// Reasons of etcd's owned flags.
const (
	ownedEtcdMembership = "it defines the etcd cluster's membership, which the controller manages"
	ownedEtcdAddress    = "the Services, probes and members use the addresses the controller picks"
	ownedEtcdClientTLS  = "etcd serves the certificate the controller issues and admits only clients with its certificates"
	ownedEtcdPeerTLS    = "members authenticate each other with the certificates the controller issues"
)

// EtcdOwnedFlags are the etcd flags of etcdStatefulSet that spec.etcd.args
// may not override. Tuning (quota-backend-bytes, compaction, snapshots)
// stays open.
var EtcdOwnedFlags = OwnedFlags{
	"advertise-client-urls":       ownedEtcdAddress,
	"client-cert-auth":            ownedEtcdClientTLS,
	"cert-file":                   ownedEtcdClientTLS,
	"data-dir":                    "it is where the member's volume is mounted",
	"initial-advertise-peer-urls": ownedEtcdAddress,
	"initial-cluster":             ownedEtcdMembership,
	"initial-cluster-state":       ownedEtcdMembership,
	"initial-cluster-token":       ownedEtcdMembership,
	"key-file":                    ownedEtcdClientTLS,
	"listen-client-urls":          ownedEtcdAddress,
	"listen-metrics-urls":         ownedEtcdAddress,
	"listen-peer-urls":            ownedEtcdAddress,
	"name":                        ownedEtcdMembership,
	"peer-cert-file":              ownedEtcdPeerTLS,
	"peer-client-cert-auth":       ownedEtcdPeerTLS,
	"peer-key-file":               ownedEtcdPeerTLS,
	"peer-trusted-ca-file":        ownedEtcdPeerTLS,
	"trusted-ca-file":             ownedEtcdClientTLS,
}

// EtcdReplicas is the number of etcd members.
func (in *Input) EtcdReplicas() int32 { return ptr.Deref(in.ControlPlane.Spec.Etcd.Replicas, 3) }

// EtcdVolumeSize is the size of each member's volume.
func (in *Input) EtcdVolumeSize() resource.Quantity { return etcdVolumeSize(in.ControlPlane) }

func etcdVolumeSize(cp *v1alpha1.HostedControlPlane) resource.Quantity {
	return ptr.Deref(cp.Spec.Etcd.VolumeSize, DefaultEtcdVolumeSize)
}

// The bounds of EtcdQuota.
const (
	// MaxEtcdQuotaBytes is etcd's suggested maximum database size, above
	// which it warns at start: a bigger database makes every
	// defragmentation, snapshot and catch-up of a member slower.
	MaxEtcdQuotaBytes = 8 << 30
	// MinEtcdQuotaBytes is about what the objects of a small cluster and the
	// eight hours of their history that etcd keeps (auto-compaction) take.
	// Less would hold the control plane read-only from the start; a volume
	// that leaves less than this is too small for etcd.
	MinEtcdQuotaBytes = 128 << 20
	// etcdLogHeadroom is the room the write-ahead log and raft snapshots take
	// beside the database: etcd keeps five WAL segments of 64MB (--max-wals),
	// writes a sixth and preallocates a seventh, about 430MiB, and a few
	// small snapshot files.
	etcdLogHeadroom = 512 << 20
	// etcdQuotaArg is the flag that sets the quota.
	etcdQuotaArg = "quota-backend-bytes"
)

// EtcdQuota is the backend quota (--quota-backend-bytes) of an etcd member
// whose volume holds volumeSize bytes. At its quota etcd raises the NOSPACE
// alarm and refuses writes, a state that compaction and defragmentation
// undo; a full volume instead fails its writes to the WAL and stops the
// member. So the quota must come first, with room left on the volume for:
//
//   - the filesystem's own metadata (ext4's inode tables and journal take a
//     few percent): one sixteenth of the volume;
//   - the WAL and snapshot files: 512MiB;
//   - a second copy of the database: defragmentation writes the compacted
//     database beside the old one before replacing it, and a member that
//     falls behind receives the leader's whole database the same way.
//
// That is quota = (volume - volume/16 - 512MiB) / 2, in whole MiB, at most
// MaxEtcdQuotaBytes (reached from about 18Gi) and at least
// MinEtcdQuotaBytes (below about 800Mi, where the volume is too small to
// keep these promises). The default 2Gi volume gets 704MiB; the upgrade
// gates hold an upgrade from 80% of it.
func EtcdQuota(volumeSize resource.Quantity) int64 {
	volume := volumeSize.Value()
	quota := (volume - volume/16 - etcdLogHeadroom) / 2
	quota &^= 1<<20 - 1
	return min(max(quota, MinEtcdQuotaBytes), MaxEtcdQuotaBytes)
}

// EtcdQuotaOf is the backend quota the etcd members of cp run with:
// spec.etcd.args' quota-backend-bytes when it is a number of bytes, or else
// EtcdQuota of their volume.
func EtcdQuotaOf(cp *v1alpha1.HostedControlPlane) int64 {
	if arg, ok := cp.Spec.Etcd.Args[etcdQuotaArg]; ok {
		if n, err := strconv.ParseInt(arg, 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return EtcdQuota(etcdVolumeSize(cp))
}

// Etcd renders the etcd cluster: a StatefulSet of members with persistent
// volumes, the headless Service that names them, the client Service, and a
// PodDisruptionBudget that keeps quorum, and its network policy.
func Etcd(in *Input) []client.Object {
	objs := []client.Object{in.etcdNetworkPolicy(), in.etcdClientService(), in.etcdPeerService(), in.etcdStatefulSet()}
	if in.EtcdReplicas() > 1 {
		objs = append(objs, in.etcdPDB())
	}
	return objs
}

// etcdMemberURL is the URL of a member on port, by its DNS name.
func (in *Input) etcdMemberURL(member string, port int) string {
	return fmt.Sprintf("https://%s.%s.%s.svc:%d", member, EtcdPeerServiceName(in.ClusterName()), in.Namespace(), port)
}

func (in *Input) etcdStatefulSet() *appsv1.StatefulSet {
	name := EtcdName(in.ClusterName())
	spec := in.ControlPlane.Spec.Etcd
	var initial []string
	for i := range in.EtcdReplicas() {
		member := fmt.Sprintf("%s-%d", name, i)
		initial = append(initial, member+"="+in.etcdMemberURL(member, etcdPeerPort))
	}
	args := flags(map[string]string{
		"name":                        "$(POD_NAME)",
		"data-dir":                    "/var/lib/etcd/data",
		"listen-client-urls":          fmt.Sprintf("https://0.0.0.0:%d", EtcdClientPort),
		"advertise-client-urls":       in.etcdMemberURL("$(POD_NAME)", EtcdClientPort),
		"listen-peer-urls":            fmt.Sprintf("https://0.0.0.0:%d", etcdPeerPort),
		"initial-advertise-peer-urls": in.etcdMemberURL("$(POD_NAME)", etcdPeerPort),
		"listen-metrics-urls":         fmt.Sprintf("http://0.0.0.0:%d", etcdMetricsPort),
		"initial-cluster":             strings.Join(initial, ","),
		"initial-cluster-state":       "new",
		"initial-cluster-token":       in.Namespace() + "-" + name,
		"client-cert-auth":            "true",
		"trusted-ca-file":             "/etc/etcd/pki/server/ca.crt",
		"cert-file":                   "/etc/etcd/pki/server/tls.crt",
		"key-file":                    "/etc/etcd/pki/server/tls.key",
		"peer-client-cert-auth":       "true",
		"peer-trusted-ca-file":        "/etc/etcd/pki/peer/ca.crt",
		"peer-cert-file":              "/etc/etcd/pki/peer/tls.crt",
		"peer-key-file":               "/etc/etcd/pki/peer/tls.key",
		"snapshot-count":              "10000",
		"auto-compaction-mode":        "periodic",
		"auto-compaction-retention":   "8h",
		etcdQuotaArg:                  strconv.FormatInt(EtcdQuota(in.EtcdVolumeSize()), 10),
	}, spec.Args)

	img := image(in.defaultImage("etcd", EtcdTag(in.version)), spec.Image)
	c := container("etcd", img, spec.Container, "etcd", args)
	c.Env = []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	c.Ports = []corev1.ContainerPort{
		{Name: EtcdClientPortName, ContainerPort: EtcdClientPort},
		{Name: "peer", ContainerPort: etcdPeerPort},
		{Name: "metrics", ContainerPort: etcdMetricsPort},
	}
	c.ReadinessProbe = probe("/readyz", etcdMetricsPort, corev1.URISchemeHTTP, 3)
	c.LivenessProbe = probe("/livez", etcdMetricsPort, corev1.URISchemeHTTP, 8)
	c.StartupProbe = probe("/readyz", etcdMetricsPort, corev1.URISchemeHTTP, 60)
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}}

	pod := corev1.PodSpec{Affinity: spreadAcrossNodes(in.Selector(EtcdComponent))}
	mountSecrets(&pod, &c,
		secretVolume{"server", in.EtcdServerSecret(), "/etc/etcd/pki/server"},
		secretVolume{"peer", in.EtcdPeerSecret(), "/etc/etcd/pki/peer"})
	pod.Containers = []corev1.Container{c}
	pod = hardenedPod(pod, spec.PriorityClassName)

	size := in.EtcdVolumeSize()
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: in.meta(name, EtcdComponent),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(in.EtcdReplicas()),
			ServiceName:         EtcdPeerServiceName(in.ClusterName()),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: in.Selector(EtcdComponent)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      in.Labels(EtcdComponent),
					Annotations: map[string]string{SecretsHashAnnotation: in.secretsHash(&pod)},
				},
				Spec: pod,
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: in.Labels(EtcdComponent)},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: spec.StorageClassName,
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
				},
			}},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
		},
	}
}

func (in *Input) etcdClientService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: in.meta(EtcdName(in.ClusterName()), EtcdComponent),
		Spec: corev1.ServiceSpec{
			Selector: in.Selector(EtcdComponent),
			Ports: []corev1.ServicePort{{
				Name: EtcdClientPortName, Port: EtcdClientPort, TargetPort: intstr.FromString(EtcdClientPortName), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

func (in *Input) etcdPeerService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: in.meta(EtcdPeerServiceName(in.ClusterName()), EtcdComponent),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 in.Selector(EtcdComponent),
			Ports: []corev1.ServicePort{
				{Name: EtcdClientPortName, Port: EtcdClientPort, TargetPort: intstr.FromString(EtcdClientPortName), Protocol: corev1.ProtocolTCP},
				{Name: "peer", Port: etcdPeerPort, TargetPort: intstr.FromString("peer"), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// etcdPDB lets one member go at a time: 3 and 5 members keep quorum then.
func (in *Input) etcdPDB() *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: in.meta(EtcdName(in.ClusterName()), EtcdComponent),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: in.Selector(EtcdComponent)},
		},
	}
}

// spreadAcrossNodes prefers to put the pods of one selector on different nodes.
func spreadAcrossNodes(selector map[string]string) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
				TopologyKey:   corev1.LabelHostname,
			},
		}},
	}}
}
