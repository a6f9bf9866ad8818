package etcd

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/blang/semver/v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Ports beside the client port.
const (
	peerPort    = 2380
	metricsPort = 2381
)

// memory is the memory a member asks for unless the user sets its
// resources: an idle one held 50 MiB resident (2026-11-29, README "What each
// container asks for"). A member's database grows with the cluster's
// objects; set resources for a large one.
const memory = "64Mi"

// dataMount is where a member's volume is mounted.
const dataMount = "/var/lib/etcd"

// memberURL is the URL of a member on port, by its DNS name.
func memberURL(in render.Input, member string, port int) string {
	return fmt.Sprintf("https://%s.%s.%s.svc:%d", member, contract.EtcdPeerServiceName(in.ClusterName()), in.Namespace(), port)
}

// MaxLearners is how many learners etcd holds at once (--max-learners,
// from etcd 3.6; 3.5 holds one): a scale from one member to three adds both
// new members together, and their pods start together and catch up
// together (their etcds start a second apart, see package join), where one
// after the other the second waits for the first's promotion and then for
// etcd's strict reconfiguration check (the leader connected to every voter,
// the new one too, for 5 s). Learners do not vote, so they cost no quorum.
const MaxLearners = 2

// imageVersion is the etcd version of the image tag (override, when set,
// else def); ok is false for a tag that is no version (a digest, latest),
// which gets etcd's defaults.
func imageVersion(override, def *string) (v semver.Version, ok bool) {
	v, err := semver.ParseTolerant(ptr.Deref(cmp.Or(override, def), ""))
	return v, err == nil
}

// holdsLearners tells whether etcd v takes --max-learners: 3.6 or later.
func holdsLearners(v semver.Version) bool { return v.Major > 3 || v.Major == 3 && v.Minor >= 6 }

// skipPeerSANFlag is the flag that has etcd v's peer listener trust a
// peer's certificate without resolving its DNS names (3.6 named it
// peer-skip-client-san-verification; 3.5 knows it with experimental- before).
//
// Unless told so, a member checks the certificate of every peer that
// connects against the address it connects from: it asks the cluster's DNS
// for the address's name and for each DNS name of the certificate (through
// the pod's search path, about fifteen queries for ours), and closes the
// connection unless one resolves to that address. A new member's address
// resolves only once the peer Service's EndpointSlice lists its pod and
// the DNS's cached answers have expired, and a query lost on a loaded node
// costs the resolver's 5 s timeout: in a test the DNS failed a peer's check
// while a new member asked for the cluster, which etcd asks once before it
// exits, and the member crash-looped. The check adds nothing to what the
// CA and the network already hold: the etcd CA is this control plane's
// own and signs only the certificates its controller asks for (the
// members', the API servers' and the health check's clients), a
// certificate without DNS names or addresses (every client's) passes the
// check anyway, and the peer port answers only the members' pods and the
// controller's namespace (networkPolicies). kubeadm keeps the check; its
// members have addresses fixed in their certificates, which pods do not.
func skipPeerSANFlag(v semver.Version) string {
	if v.Major == 3 && v.Minor < 6 {
		return "experimental-peer-skip-client-san-verification"
	}
	return "peer-skip-client-san-verification"
}

func statefulSet(in render.Input) *appsv1.StatefulSet {
	name := contract.EtcdName(in.ClusterName())
	spec := in.ControlPlane.Spec.Etcd
	defaults := map[string]string{
		"name":                        "$(POD_NAME)",
		"data-dir":                    dataMount + "/data",
		"listen-client-urls":          fmt.Sprintf("https://0.0.0.0:%d", contract.EtcdClientPort),
		"advertise-client-urls":       memberURL(in, "$(POD_NAME)", contract.EtcdClientPort),
		"listen-peer-urls":            fmt.Sprintf("https://0.0.0.0:%d", peerPort),
		"initial-advertise-peer-urls": memberURL(in, "$(POD_NAME)", peerPort),
		"listen-metrics-urls":         fmt.Sprintf("http://0.0.0.0:%d", metricsPort),
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
		contract.EtcdQuotaFlag:        strconv.FormatInt(contract.EtcdQuota(quotaVolume(in)), 10),
	}
	image := in.DefaultImage(contract.EtcdRepository, Tag(in.Version()))
	if v, ok := imageVersion(ptr.Deref(spec.Image, v1alpha1.ImageSpec{}).Tag, image.Tag); ok {
		defaults[skipPeerSANFlag(v)] = "true"
		if holdsLearners(v) {
			defaults["max-learners"] = strconv.Itoa(MaxLearners)
		}
	}
	trust := trustBundle(in, defaults)
	args := render.Flags(defaults, spec.Args)

	img := render.Image(image, spec.Image)
	c := render.Container("etcd", img, render.WithResources(spec.Container, render.MemoryRequest(memory)), "etcd", args)
	c.Env = append(c.Env, corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	// The membership comes from the ConfigMap (see membersConfigMap), read
	// when the container starts.
	for _, key := range []string{initialClusterEnv, initialClusterStateEnv} {
		c.Env = append(c.Env, corev1.EnvVar{Name: key, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: MembersConfigMap(in.ClusterName())}, Key: key,
		}}})
	}
	c.Ports = []corev1.ContainerPort{
		{Name: contract.EtcdClientPortName, ContainerPort: contract.EtcdClientPort},
		{Name: "peer", ContainerPort: peerPort},
		{Name: "metrics", ContainerPort: metricsPort},
	}
	c.ReadinessProbe = render.Probe("/readyz", metricsPort, corev1.URISchemeHTTP, 3)
	c.LivenessProbe = render.Probe("/livez", metricsPort, corev1.URISchemeHTTP, 8)
	c.StartupProbe = render.StartupProbe("/readyz", metricsPort, corev1.URISchemeHTTP, 600)
	// The tail of its log becomes its termination message when etcd fails,
	// so that the controller can tell why a member is down (see Diagnose).
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	c.VolumeMounts = []corev1.VolumeMount{{Name: claimName, MountPath: dataMount}}

	pod := corev1.PodSpec{Affinity: render.SpreadAcrossNodes(in.Selector(contract.EtcdComponent))}
	render.MountSecrets(&pod, &c,
		render.SecretVolume{Name: "server", Secret: ServerSecret(in), Path: "/etc/etcd/pki/server"},
		render.SecretVolume{Name: "peer", Secret: PeerSecret(in), Path: "/etc/etcd/pki/peer"})
	render.MountSecrets(&pod, &c, trust...)
	pod.Containers = []corev1.Container{c}
	if restore, ok := restoreContainer(in, c); ok {
		pod.InitContainers = []corev1.Container{restore}
	}
	pod.InitContainers = append(pod.InitContainers, joinContainer(in, c))
	pod = render.HardenedPod(pod, spec.PriorityClassName)
	template := in.PodTemplate(in.Labels(contract.EtcdComponent), pod)
	if id := in.EtcdRestoreID; id != "" {
		template.Annotations[contract.EtcdRestoreIDAnnotation] = id
	}
	// A member's volume goes with it: a member is removed from etcd before
	// its pod, and a volume kept would hold the data of a member that no
	// longer exists for the next one of its name. A restore in place stops
	// every member and keeps their volumes, whose size autoGrow may have
	// raised.
	whenScaled := appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	if in.RestoringEtcd() {
		whenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}

	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: in.Meta(name, contract.EtcdComponent),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(pods(in)),
			ServiceName:         contract.EtcdPeerServiceName(in.ClusterName()),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: in.Selector(contract.EtcdComponent)},
			Template:            template,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: claimName, Labels: in.Labels(contract.EtcdComponent)},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: spec.StorageClassName,
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: volumeSize(in),
					}},
				},
			}},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  whenScaled,
			},
		},
	}
}

// joinFlags are the flags of etcd the join init container takes from the
// etcd container: who the member is, and the peer certificate it asks its
// peers with.
var joinFlags = []string{"name", "data-dir", "initial-advertise-peer-urls", "peer-cert-file", "peer-key-file", "peer-trusted-ca-file"}

// joinContainerName names joinContainer, whose exit the controller reads
// (join.ExitLostData).
const joinContainerName = "wait-for-peers"

// joinContainer lets a member that joins start etcd only once a peer would
// let it join (cmd/etcd-restore --wait-for-peers, package join): etcd asks
// its peers for the cluster once as it starts, and exits when none answers
// or the answer is not the membership it read. It reads what etcd reads,
// through etcd's own mounts read-only, and takes etcd's resources, so that
// the pod asks for no more than etcd does.
func joinContainer(in render.Input, etcd corev1.Container) corev1.Container {
	c := render.Container(joinContainerName, in.Settings.EtcdRestoreImage, v1alpha1.Container{}, "/etcd-restore",
		append([]string{"--wait-for-peers"}, argsOf(etcd, joinFlags)...))
	c.Resources = etcd.Resources
	c.Env = slices.Clone(etcd.Env)
	c.VolumeMounts = slices.Clone(etcd.VolumeMounts)
	for i := range c.VolumeMounts {
		c.VolumeMounts[i].ReadOnly = true
	}
	return c
}

func clientService(in render.Input) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: in.Meta(contract.EtcdName(in.ClusterName()), contract.EtcdComponent),
		Spec: corev1.ServiceSpec{
			Selector: in.Selector(contract.EtcdComponent),
			Ports: []corev1.ServicePort{{
				Name: contract.EtcdClientPortName, Port: contract.EtcdClientPort, TargetPort: intstr.FromString(contract.EtcdClientPortName), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

func peerService(in render.Input) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: in.Meta(contract.EtcdPeerServiceName(in.ClusterName()), contract.EtcdComponent),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 in.Selector(contract.EtcdComponent),
			Ports: []corev1.ServicePort{
				{Name: contract.EtcdClientPortName, Port: contract.EtcdClientPort, TargetPort: intstr.FromString(contract.EtcdClientPortName), Protocol: corev1.ProtocolTCP},
				{Name: "peer", Port: peerPort, TargetPort: intstr.FromString("peer"), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// disruptionBudget lets one member go at a time: 3 and 5 members keep
// quorum then.
func disruptionBudget(in render.Input) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: in.Meta(contract.EtcdName(in.ClusterName()), contract.EtcdComponent),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: in.Selector(contract.EtcdComponent)},
		},
	}
}

// networkPolicies: etcd answers only its peers, its API servers and the
// controller's namespace (the controller and the extension check its
// health, change its membership and take snapshots through the client
// port; during a rotation of the etcd CA the controller also reads the
// certificate a member presents on its peer port, see Checker.Presents).
// It reaches only its peers and DNS, which resolves their names;
// while its pods restore a snapshot as they start (restoreContainer, the
// same condition), they also reach the S3 store the presigned URL names.
// That address is the store's, read from a backup Secret the tenant may
// not see, and a policy takes no host name, so the rule admits TCP to any
// address but the link-local ones and the management API server's
// (Input.Outside); every other hosted etcd still admits only its own
// clients.
func networkPolicies(in render.Input) []client.Object {
	clients := append([]networkingv1.NetworkPolicyPeer{in.PodsOf(contract.APIServerComponent), in.PodsOf(contract.EtcdComponent)}, in.ControllerPeer()...)
	peers := []networkingv1.NetworkPolicyPeer{in.PodsOf(contract.EtcdComponent)}
	egress := []networkingv1.NetworkPolicyEgressRule{
		{To: peers, Ports: []networkingv1.NetworkPolicyPort{render.TCPPort(peerPort)}},
		render.DNS(),
	}
	if restores(in) {
		egress = append(egress, in.Outside())
	}
	return in.NetworkPolicies(contract.EtcdComponent, render.Traffic{
		Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: clients, Ports: []networkingv1.NetworkPolicyPort{render.TCPPort(contract.EtcdClientPort)}},
			{From: append(slices.Clone(peers), in.ControllerPeer()...), Ports: []networkingv1.NetworkPolicyPort{render.TCPPort(peerPort)}},
		},
		Egress: egress,
	})
}
