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

	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Etcd ports beside the client port.
const (
	etcdPeerPort    = 2380
	etcdMetricsPort = 2381
)

// EtcdReplicas is the number of etcd members.
func (in *Input) EtcdReplicas() int32 { return ptr.Deref(in.ControlPlane.Spec.Etcd.Replicas, 3) }

// EtcdVolumeSize is the size of each member's volume.
func (in *Input) EtcdVolumeSize() resource.Quantity { return contract.EtcdVolumeSize(in.ControlPlane) }

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
	return fmt.Sprintf("https://%s.%s.%s.svc:%d", member, contract.EtcdPeerServiceName(in.ClusterName()), in.Namespace(), port)
}

func (in *Input) etcdStatefulSet() *appsv1.StatefulSet {
	name := contract.EtcdName(in.ClusterName())
	spec := in.ControlPlane.Spec.Etcd
	var initial []string
	for i := range in.EtcdReplicas() {
		member := fmt.Sprintf("%s-%d", name, i)
		initial = append(initial, member+"="+in.etcdMemberURL(member, etcdPeerPort))
	}
	args := flags(map[string]string{
		"name":                        "$(POD_NAME)",
		"data-dir":                    "/var/lib/etcd/data",
		"listen-client-urls":          fmt.Sprintf("https://0.0.0.0:%d", contract.EtcdClientPort),
		"advertise-client-urls":       in.etcdMemberURL("$(POD_NAME)", contract.EtcdClientPort),
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
		contract.EtcdQuotaFlag:        strconv.FormatInt(contract.EtcdQuota(in.EtcdVolumeSize()), 10),
	}, spec.Args)

	img := image(in.defaultImage("etcd", EtcdTag(in.version)), spec.Image)
	c := container("etcd", img, spec.Container, "etcd", args)
	c.Env = []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	c.Ports = []corev1.ContainerPort{
		{Name: contract.EtcdClientPortName, ContainerPort: contract.EtcdClientPort},
		{Name: "peer", ContainerPort: etcdPeerPort},
		{Name: "metrics", ContainerPort: etcdMetricsPort},
	}
	c.ReadinessProbe = probe("/readyz", etcdMetricsPort, corev1.URISchemeHTTP, 3)
	c.LivenessProbe = probe("/livez", etcdMetricsPort, corev1.URISchemeHTTP, 8)
	c.StartupProbe = probe("/readyz", etcdMetricsPort, corev1.URISchemeHTTP, 60)
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}}

	pod := corev1.PodSpec{Affinity: spreadAcrossNodes(in.Selector(contract.EtcdComponent))}
	mountSecrets(&pod, &c,
		secretVolume{"server", in.EtcdServerSecret(), "/etc/etcd/pki/server"},
		secretVolume{"peer", in.EtcdPeerSecret(), "/etc/etcd/pki/peer"})
	pod.Containers = []corev1.Container{c}
	pod = hardenedPod(pod, spec.PriorityClassName)

	size := in.EtcdVolumeSize()
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: in.meta(name, contract.EtcdComponent),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(in.EtcdReplicas()),
			ServiceName:         contract.EtcdPeerServiceName(in.ClusterName()),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: in.Selector(contract.EtcdComponent)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      in.Labels(contract.EtcdComponent),
					Annotations: map[string]string{SecretsHashAnnotation: in.secretsHash(&pod)},
				},
				Spec: pod,
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: in.Labels(contract.EtcdComponent)},
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
		ObjectMeta: in.meta(contract.EtcdName(in.ClusterName()), contract.EtcdComponent),
		Spec: corev1.ServiceSpec{
			Selector: in.Selector(contract.EtcdComponent),
			Ports: []corev1.ServicePort{{
				Name: contract.EtcdClientPortName, Port: contract.EtcdClientPort, TargetPort: intstr.FromString(contract.EtcdClientPortName), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

func (in *Input) etcdPeerService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: in.meta(contract.EtcdPeerServiceName(in.ClusterName()), contract.EtcdComponent),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 in.Selector(contract.EtcdComponent),
			Ports: []corev1.ServicePort{
				{Name: contract.EtcdClientPortName, Port: contract.EtcdClientPort, TargetPort: intstr.FromString(contract.EtcdClientPortName), Protocol: corev1.ProtocolTCP},
				{Name: "peer", Port: etcdPeerPort, TargetPort: intstr.FromString("peer"), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// etcdPDB lets one member go at a time: 3 and 5 members keep quorum then.
func (in *Input) etcdPDB() *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: in.meta(contract.EtcdName(in.ClusterName()), contract.EtcdComponent),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: in.Selector(contract.EtcdComponent)},
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
