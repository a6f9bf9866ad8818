package hooks

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

const (
	// RetryAfterSetting is the ExtensionConfig setting (spec.settings) with
	// the seconds Cluster API waits before asking a holding gate again.
	RetryAfterSetting = "retryAfterSeconds"
	// DefaultRetryAfterSeconds is used when the setting is absent.
	DefaultRetryAfterSeconds = 30
	maxRetryAfterSeconds     = 600

	// gateTimeout bounds a gate's whole check, so that a hook answers well
	// within its own timeout even when etcd does not.
	gateTimeout = 5 * time.Second
)

// Handlers serve the lifecycle hooks.
type Handlers struct {
	// Reader reads HostedControlPlanes, etcd's client certificate Secrets
	// and EndpointSlices. It should read straight from the API server: a
	// gate decides on what is true now, it is asked rarely, and a cache
	// would hold every Secret of the management cluster.
	Reader client.Reader
	// Etcd checks etcd and keeps its clients.
	Etcd *etcd.Checker
}

// BeforeClusterUpgrade holds an upgrade until the control plane is healthy.
func (h *Handlers) BeforeClusterUpgrade(ctx context.Context, req *runtimehooksv1.BeforeClusterUpgradeRequest, resp *runtimehooksv1.BeforeClusterUpgradeResponse) {
	h.gate(ctx, "BeforeClusterUpgrade", req.Settings, &req.Cluster, "the upgrade to "+req.ToKubernetesVersion, resp)
}

// BeforeControlPlaneUpgrade holds each step of an upgrade until the control
// plane is healthy.
func (h *Handlers) BeforeControlPlaneUpgrade(ctx context.Context, req *runtimehooksv1.BeforeControlPlaneUpgradeRequest, resp *runtimehooksv1.BeforeControlPlaneUpgradeResponse) {
	h.gate(ctx, "BeforeControlPlaneUpgrade", req.Settings, &req.Cluster, "the control plane upgrade to "+req.ToKubernetesVersion, resp)
}

// gate answers Success either way; a hold sets retryAfterSeconds and says
// why. Only a bad setting, which waiting cannot fix, is a Failure. Each
// answer counts in hostedcp_upgrade_gate_decisions_total under hook.
func (h *Handlers) gate(ctx context.Context, hook string, settings map[string]string, cluster *clusterv1.Cluster, what string, resp runtimehooksv1.RetryResponseObject) {
	log := ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KObj(cluster))
	retry, err := retryAfter(settings)
	if err != nil {
		gateDecisions.WithLabelValues(hook, refuse, badSettingReason).Inc()
		resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
		resp.SetMessage(err.Error())
		return
	}
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	reason, problems := h.judge(ctx, cluster)
	if len(problems) == 0 {
		gateDecisions.WithLabelValues(hook, allow, reason).Inc()
		log.Info("Control plane is healthy, allowing " + what)
		return
	}
	gateDecisions.WithLabelValues(hook, hold, reason).Inc()
	msg := fmt.Sprintf("holding %s until the control plane is healthy: %s", what, strings.Join(problems, "; "))
	log.Info("Holding an upgrade", "reason", msg, "retryAfterSeconds", retry)
	resp.SetRetryAfterSeconds(retry)
	resp.SetMessage(msg)
}

func retryAfter(settings map[string]string) (int32, error) {
	value, ok := settings[RetryAfterSetting]
	if !ok {
		return DefaultRetryAfterSeconds, nil
	}
	n, err := strconv.ParseInt(value, 10, 32)
	if err != nil || n < 1 || n > maxRetryAfterSeconds {
		return 0, fmt.Errorf("ExtensionConfig setting %s %q: use a whole number of seconds from 1 to %d",
			RetryAfterSetting, value, maxRetryAfterSeconds)
	}
	return int32(n), nil
}

// Problems says what keeps the Cluster's hosted control plane from being
// upgraded: its HostedControlPlane is not Available, or its etcd is not
// healthy. It is empty when nothing does, and for control planes of other
// kinds, which this extension does not judge.
func (h *Handlers) Problems(ctx context.Context, cluster *clusterv1.Cluster) []string {
	_, problems := h.judge(ctx, cluster)
	return problems
}

// judge is Problems with the reason of the verdict, as the metric tells it.
func (h *Handlers) judge(ctx context.Context, cluster *clusterv1.Cluster) (string, []string) {
	ref := cluster.Spec.ControlPlaneRef
	if !ref.IsDefined() || ref.APIGroup != v1alpha1.GroupVersion.Group || ref.Kind != "HostedControlPlane" {
		ctrl.LoggerFrom(ctx).V(4).Info("Not a hosted control plane, not judging it", "controlPlaneRef", ref)
		return notHostedReason, nil
	}
	ctx, cancel := context.WithTimeout(ctx, gateTimeout)
	defer cancel()
	var problems []string
	reason := healthyReason
	hcp, p := h.availability(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: ref.Name})
	if p != "" {
		problems = append(problems, p)
		reason = notAvailableReason
	}
	var quota int64
	if hcp != nil {
		quota = contract.EtcdQuotaOf(hcp)
	}
	if p := h.etcdHealth(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: cluster.Name}, quota); p != "" {
		problems = append(problems, p)
		if reason == healthyReason {
			reason = etcdReason
		}
	}
	return reason, problems
}

// availability reads the HostedControlPlane, nil when it cannot, and says
// why it is not Available.
func (h *Handlers) availability(ctx context.Context, name types.NamespacedName) (*v1alpha1.HostedControlPlane, string) {
	hcp := &v1alpha1.HostedControlPlane{}
	if err := h.Reader.Get(ctx, name, hcp); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("HostedControlPlane %s does not exist", name)
		}
		return nil, fmt.Sprintf("cannot read HostedControlPlane %s: %v", name, err)
	}
	c := meta.FindStatusCondition(hcp.Status.Conditions, v1alpha1.AvailableCondition)
	switch {
	case c == nil:
		return hcp, fmt.Sprintf("HostedControlPlane %s reports no Available condition yet", name)
	case c.Status != metav1.ConditionTrue:
		return hcp, fmt.Sprintf("HostedControlPlane %s is not Available (%s: %s)", name, c.Reason, c.Message)
	case c.ObservedGeneration != 0 && c.ObservedGeneration < hcp.Generation:
		return hcp, fmt.Sprintf("HostedControlPlane %s has not reported on its generation %d yet", name, hcp.Generation)
	}
	return hcp, ""
}

// etcdHealth checks the Cluster's etcd. Members report the quota they run
// with (etcd 3.6 on); quota, the one the control plane renders, stands in
// for older members' silence.
func (h *Handlers) etcdHealth(ctx context.Context, cluster types.NamespacedName, quota int64) string {
	target, err := etcd.TargetFor(ctx, h.Reader, cluster)
	if err != nil {
		return "etcd: " + err.Error()
	}
	target.Quota = quota
	report, err := h.Etcd.Check(ctx, target)
	if err != nil {
		return "etcd: " + err.Error()
	}
	if !report.Healthy() {
		return "etcd: " + report.String()
	}
	return ""
}
