package components

import (
	"context"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// KonnectivityAgentName is the konnectivity agent Deployment and
// ServiceAccount in kube-system; the konnectivity server accepts agents of
// that service account only.
const KonnectivityAgentName = "konnectivity-agent"

// KonnectivityAgent is the agents through which the API servers reach nodes
// and pods (logs, exec, port-forward, webhooks): a Deployment
// (spec.konnectivityClient tunes it) that dials the konnectivity server at
// konnectivityHost and the observed KonnectivityPort, verifies it with the
// cluster CA of its service account and authenticates with a token for the
// server's audience, which the server reviews as system:konnectivity-server.
type KonnectivityAgent struct{}

// Name names its golden file.
func (KonnectivityAgent) Name() string { return "konnectivity-agent" }

// Condition reports it.
func (KonnectivityAgent) Condition() string { return v1alpha1.KonnectivityAgentReadyCondition }

// Ready is rolled out.
func (KonnectivityAgent) Ready(ctx context.Context, c client.Reader, _ render.Input, applied readiness.Applied) (readiness.Outcome, error) {
	return rolledOutOnNodes(ctx, c, applied)
}

// Render renders the agents, their service account and its RBAC.
func (KonnectivityAgent) Render(in render.Input) ([]client.Object, error) {
	return []client.Object{
		serviceAccount("kube-system", KonnectivityAgentName),
		clusterRoleBinding("system:konnectivity-server", "system:auth-delegator",
			rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: KonnectivityAudience}),
		konnectivityAgentDeployment(in),
	}, nil
}

func konnectivityAgentDeployment(in render.Input) *appsv1.Deployment {
	spec := in.ControlPlane.Spec.KonnectivityClient
	selector := map[string]string{k8sAppLabel: KonnectivityAgentName}
	const tokenDir = "/var/run/secrets/tokens" //nolint:gosec // where the token is mounted, not a credential
	c := render.Container(KonnectivityAgentName,
		render.Image(in.DefaultImage(contract.KonnectivityAgentRepository, KonnectivityTag(in.AddonsSemver())), spec.Image),
		spec.Container, "/proxy-agent", render.Flags(map[string]string{
			"ca-cert":                    serviceAccountDir + "/ca.crt",
			"proxy-server-host":          konnectivityHost(in),
			"proxy-server-port":          strconv.Itoa(int(in.KonnectivityPort)),
			"admin-server-port":          strconv.Itoa(konnectivityAdmin),
			"health-server-port":         strconv.Itoa(konnectivityHealth),
			"service-account-token-path": tokenDir + "/" + KonnectivityAgentName,
		}, spec.Args))
	c.LivenessProbe = render.Probe("/healthz", konnectivityHealth, corev1.URISchemeHTTP, 3)
	c.VolumeMounts = []corev1.VolumeMount{{Name: "token", MountPath: tokenDir, ReadOnly: true}}
	pod := render.HardenedPod(corev1.PodSpec{
		ServiceAccountName: KonnectivityAgentName,
		// The server's name resolves outside the workload cluster, and
		// agents must run before cluster DNS does.
		DNSPolicy:   corev1.DNSDefault,
		Tolerations: []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}},
		Affinity:    render.SpreadAcrossNodes(selector),
		Containers:  []corev1.Container{c},
		Volumes: []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Path: KonnectivityAgentName, Audience: KonnectivityAudience,
			}}},
		}}}},
	}, priorityClass(spec.PriorityClassName, "system-cluster-critical"))
	// The agent reads the cluster CA from its service account's mount.
	pod.AutomountServiceAccountToken = nil
	return addonDeployment(KonnectivityAgentName, selector, ptr.Deref(spec.Replicas, 2), pod)
}
