package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/apply"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
)

// A bad situation is told once when it begins and again only when it
// changes; progress is never told.
func TestRecordTellsNewSituationsOnce(t *testing.T) {
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{recorder: recorder}
	hcp := &v1alpha1.HostedControlPlane{}
	missing := readiness.Problem(v1alpha1.GatewayNotFoundReason, "Gateway capi-system/capi does not exist")
	noListener := readiness.Problem(v1alpha1.GatewayListenerReason, "the Gateway capi-system/capi has no listener")
	for _, out := range []readiness.Outcome{
		missing, missing, missing, // retries of one situation
		noListener, noListener, // a new one
		readiness.Waiting(v1alpha1.EndpointPendingReason, "waiting for an address"),
		missing, // back again
	} {
		r.record(hcp, v1alpha1.ExposureReadyCondition, out)
	}
	close(recorder.Events)
	var told []string
	for e := range recorder.Events {
		told = append(told, e)
	}
	assert.Equal(t, []string{
		"Warning GatewayNotFound Gateway capi-system/capi does not exist",
		"Warning GatewayListenerMissing the Gateway capi-system/capi has no listener",
		"Warning GatewayNotFound Gateway capi-system/capi does not exist",
	}, told)
}

// A retry that reads the control plane from a cache that has not seen the
// condition the last pass wrote yet does not tell the situation again; after
// a restart of the controller, the condition alone says it was told.
func TestRecordTellsOnceDespiteAStaleCache(t *testing.T) {
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{recorder: recorder}
	stale := &v1alpha1.HostedControlPlane{}
	stale.UID = "c0ffee"
	missing := readiness.Problem(v1alpha1.ClusterNetworkMissingReason, "Cluster demo has no spec.clusterNetwork.services.cidrBlocks")
	for range 3 {
		r.record(stale.DeepCopy(), v1alpha1.ClusterReadyCondition, missing)
	}
	written := stale.DeepCopy()
	r.record(written, v1alpha1.ClusterReadyCondition, missing)
	restarted := &Reconciler{recorder: recorder}
	restarted.record(written, v1alpha1.ClusterReadyCondition, missing)
	close(recorder.Events)
	assert.Len(t, recorder.Events, 1)
}

func conditionsOf(phases []phase) []string {
	var out []string
	for _, p := range phases {
		out = append(out, p.condition)
	}
	return out
}

// Phases run in the order a rollout needs, components that share a
// condition form one phase, and every condition the controller writes is
// one it owns, so the patch helper keeps it on a conflict.
func TestPhasesAndOwnedConditions(t *testing.T) {
	management := managementPhases(etcd.Component{})
	assert.Equal(t, []string{
		v1alpha1.ClusterReadyCondition, v1alpha1.ExposureReadyCondition, v1alpha1.CertificatesReadyCondition,
		v1alpha1.KubeconfigReadyCondition, v1alpha1.EtcdReadyCondition, v1alpha1.APIServerReadyCondition,
		v1alpha1.ControllersReadyCondition,
	}, conditionsOf(management), "etcd before the API servers before the controllers")
	names := map[string][]string{}
	for _, p := range management {
		for _, c := range p.components {
			names[p.condition] = append(names[p.condition], c.Name())
		}
	}
	assert.Empty(t, names[v1alpha1.ClusterReadyCondition], "building the Input decides ClusterReady")
	assert.Equal(t, []string{"configs", "cluster-kubeconfig"}, names[v1alpha1.KubeconfigReadyCondition])
	assert.Equal(t, []string{"controller-manager", "scheduler"}, names[v1alpha1.ControllersReadyCondition])

	workload := workloadPhases()
	assert.Equal(t, []string{
		v1alpha1.NodeJoinReadyCondition, v1alpha1.KubernetesServiceReadyCondition, v1alpha1.CoreDNSReadyCondition,
		v1alpha1.KubeProxyReadyCondition, v1alpha1.KonnectivityAgentReadyCondition,
	}, conditionsOf(workload))

	// The rewrite of the workload cluster's Secrets has a condition of its
	// own, and so have the renewal of the certificates, the service
	// account key and the CAs the control plane rotates.
	written := append(append([]string{
		v1alpha1.AvailableCondition, v1alpha1.EtcdRestoredCondition, v1alpha1.ImagesAllowedCondition, v1alpha1.CertificatesRenewedCondition,
		v1alpha1.ServiceAccountKeyReadyCondition, v1alpha1.EtcdCAReadyCondition, v1alpha1.FrontProxyCAReadyCondition, v1alpha1.ClusterCAReadyCondition,
	}, conditionsOf(management)...), conditionsOf(workload)...)
	written = append(written, v1alpha1.EncryptionReadyCondition)
	assert.ElementsMatch(t, written, ownedConditions())
}

// Only neighbours share a phase: a condition that comes back later in a list
// is a phase of its own.
func TestPhasesOfGroupsNeighbours(t *testing.T) {
	list := []components.Component{
		&fakeComponent{name: "a", condition: "A"}, &fakeComponent{name: "b", condition: "A"},
		&fakeComponent{name: "c", condition: "B"}, &fakeComponent{name: "d", condition: "A"},
	}
	phases := phasesOf(list)
	assert.Equal(t, []string{"A", "B", "A"}, conditionsOf(phases))
	assert.Len(t, phases[0].components, 2)
}

// markWaiting tells the later phases what they wait for, but keeps what a
// later phase observed before.
func TestMarkWaitingKeepsObservations(t *testing.T) {
	hcp := &v1alpha1.HostedControlPlane{}
	setCondition(hcp, v1alpha1.APIServerReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason, "rolled out")
	markWaiting(hcp, managementPhases(etcd.Component{}), 2) // CertificatesReady is not done
	for _, c := range []string{v1alpha1.KubeconfigReadyCondition, v1alpha1.EtcdReadyCondition, v1alpha1.ControllersReadyCondition} {
		got := conditions.Get(hcp, c)
		if assert.NotNil(t, got, c) {
			assert.Equal(t, v1alpha1.WaitingReason, got.Reason, c)
			assert.Equal(t, "waiting for "+v1alpha1.CertificatesReadyCondition, got.Message, c)
		}
	}
	assert.Equal(t, v1alpha1.ReadyReason, conditions.Get(hcp, v1alpha1.APIServerReadyCondition).Reason)
	assert.Nil(t, conditions.Get(hcp, v1alpha1.ExposureReadyCondition), "an earlier phase is left alone")
}

// Errors become the outcome that names the situation, each a bad one that
// is told and retried.
func TestFailureNamesTheSituation(t *testing.T) {
	noMatch := func(group string) error {
		return &apimeta.NoKindMatchError{GroupKind: schema.GroupKind{Group: group, Kind: "Thing"}, SearchedVersions: []string{"v1"}}
	}
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{fmt.Errorf("apply: %w", &apply.ConflictError{Kind: "Service", Namespace: "ns", Name: "demo-apiserver"}), v1alpha1.ConflictReason},
		{noMatch("cert-manager.io"), v1alpha1.CertManagerMissingReason},
		{noMatch("gateway.networking.k8s.io"), v1alpha1.GatewayAPIMissingReason},
		{errors.New("connection refused"), v1alpha1.ApplyFailedReason},
	} {
		out := failure(tc.err)
		assert.True(t, out.Warn, tc.reason)
		assert.False(t, out.Done, tc.reason)
		assert.Equal(t, tc.reason, out.Reason)
	}
}

// A phase of several components is done when each is, and otherwise says
// what those not done wait for; one component's outcome is the phase's.
func TestCombine(t *testing.T) {
	disabled := readiness.Outcome{Done: true, Reason: v1alpha1.DisabledReason, Message: "disabled"}
	pollA := readiness.Waiting(v1alpha1.EndpointPendingReason, "a waits")
	pollA.Poll = true
	for name, tc := range map[string]struct {
		outs []readiness.Outcome
		want readiness.Outcome
	}{
		"one":             {[]readiness.Outcome{disabled}, disabled},
		"all done":        {[]readiness.Outcome{readiness.Ready(""), readiness.Ready("Secret k holds it")}, readiness.Ready("Secret k holds it")},
		"all done, named": {[]readiness.Outcome{readiness.Ready("a rolled out"), readiness.Ready("b rolled out")}, readiness.Ready("a rolled out; b rolled out")},
		"one waits": {
			[]readiness.Outcome{readiness.Ready("a rolled out"), readiness.RollingOut("b")},
			readiness.RollingOut("b"),
		},
		"both wait": {
			[]readiness.Outcome{pollA, readiness.Waiting(v1alpha1.ProgressingReason, "b: 1 of 2 available")},
			readiness.Outcome{Poll: true, Reason: v1alpha1.EndpointPendingReason, Message: "a waits; b: 1 of 2 available"},
		},
	} {
		assert.Equal(t, tc.want, combine(tc.outs), name)
	}
}

// fakeComponent renders nothing and is as ready as it is told.
type fakeComponent struct {
	name, condition string
	out             readiness.Outcome
	err             error
	rendered        bool
}

func (f *fakeComponent) Name() string      { return f.name }
func (f *fakeComponent) Condition() string { return f.condition }
func (f *fakeComponent) Render(render.Input) ([]client.Object, error) {
	f.rendered = true
	return nil, f.err
}

func (f *fakeComponent) Ready(context.Context, client.Reader, render.Input, readiness.Applied) (readiness.Outcome, error) {
	return f.out, nil
}

// onFakeCluster is a Reconciler and a side on an empty fake cluster.
func onFakeCluster() (*Reconciler, side) {
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
	return &Reconciler{client: c, recorder: events.NewFakeRecorder(10)}, side{applier: &apply.Applier{Client: c, Reader: c, LiveReader: c}}
}

// The management side stops at the first phase that is not done, which then
// holds Available, and the later ones wait for it; an outcome observation
// decided stands for its phase without rendering anything.
func TestRunStopsAtTheFirstPhaseNotDone(t *testing.T) {
	r, on := onFakeCluster()
	on.ordered = true
	exposure := &fakeComponent{name: "exposure", condition: v1alpha1.ExposureReadyCondition, out: readiness.Ready("served")}
	certs := &fakeComponent{name: "pki", condition: v1alpha1.CertificatesReadyCondition, out: readiness.Waiting(v1alpha1.IssuingReason, "issuing")}
	etcd := &fakeComponent{name: "etcd", condition: v1alpha1.EtcdReadyCondition, out: readiness.Ready("ready")}
	phases := append([]phase{{condition: v1alpha1.ClusterReadyCondition}}, phasesOf([]components.Component{exposure, certs, etcd})...)
	s := &scope{
		hcp:  &v1alpha1.HostedControlPlane{},
		held: map[string]readiness.Outcome{v1alpha1.ClusterReadyCondition: readiness.Ready("Cluster demo is ready")},
		done: map[string]bool{},
	}

	assert.Empty(t, r.run(t.Context(), s, on, phases))
	require.NotNil(t, s.blocked)
	assert.Equal(t, v1alpha1.CertificatesReadyCondition, s.blocked.condition)
	assert.Equal(t, map[string]bool{v1alpha1.ClusterReadyCondition: true, v1alpha1.ExposureReadyCondition: true}, s.done)
	assert.False(t, etcd.rendered, "a phase after the one not done does not run")
	assert.Equal(t, "waiting for "+v1alpha1.CertificatesReadyCondition, conditions.Get(s.hcp, v1alpha1.EtcdReadyCondition).Message)
	assert.Equal(t, "served", conditions.Get(s.hcp, v1alpha1.ExposureReadyCondition).Message)

	// A Gateway that does not exist holds the exposure before it renders.
	exposure.rendered = false
	s.held[v1alpha1.ExposureReadyCondition] = readiness.Problem(v1alpha1.GatewayNotFoundReason, "no Gateway")
	s.blocked, s.done = nil, map[string]bool{}
	r.run(t.Context(), s, on, phases)
	assert.False(t, exposure.rendered)
	assert.Equal(t, v1alpha1.ExposureReadyCondition, s.blocked.condition)
	assert.True(t, s.blocked.Warn)
}

// On a control plane's first start the API servers' Deployment is created
// while etcd's pods start, the controllers wait for one API server of the
// control plane's version to be ready, and the first phase not done holds
// Available; once that Deployment exists, once the control plane has
// answered, while a restore runs, or when etcd is in a bad situation, a
// phase not done stops the pass again.
func TestFirstStartKeepsTheLaterWorkloads(t *testing.T) {
	r, on := onFakeCluster()
	on.ordered = true
	certs := &fakeComponent{name: "pki", condition: v1alpha1.CertificatesReadyCondition, out: readiness.Ready("issued")}
	members := &fakeComponent{name: "etcd", condition: v1alpha1.EtcdReadyCondition}
	apiServers := &fakeComponent{name: "apiserver", condition: v1alpha1.APIServerReadyCondition, out: readiness.RollingOut("the API servers")}
	controllers := &fakeComponent{name: "controller-manager", condition: v1alpha1.ControllersReadyCondition, out: readiness.RollingOut("the controller manager")}
	phases := phasesOf([]components.Component{certs, members, apiServers, controllers})
	passWith := func(hcp *v1alpha1.HostedControlPlane, etcdOut readiness.Outcome, apiServer *appsv1.Deployment) *scope {
		members.out = etcdOut
		apiServers.rendered, controllers.rendered = false, false
		s := &scope{hcp: hcp, held: map[string]readiness.Outcome{}, done: map[string]bool{}, facts: &facts{apiServer: apiServer}}
		r.run(t.Context(), s, on, phases)
		return s
	}
	pass := func(hcp *v1alpha1.HostedControlPlane, etcdOut readiness.Outcome) *scope {
		return passWith(hcp, etcdOut, nil)
	}
	starting := readiness.Waiting(v1alpha1.ProgressingReason, "1 of 3 etcd members ready")

	s := pass(&v1alpha1.HostedControlPlane{}, starting)
	assert.True(t, apiServers.rendered, "the API servers start beside etcd")
	assert.False(t, controllers.rendered, "the controllers wait for the API servers")
	assert.Equal(t, "waiting for "+v1alpha1.APIServerReadyCondition, conditions.Get(s.hcp, v1alpha1.ControllersReadyCondition).Message)
	require.NotNil(t, s.blocked)
	assert.Equal(t, v1alpha1.EtcdReadyCondition, s.blocked.condition, "etcd still holds Available")
	assert.Equal(t, map[string]bool{v1alpha1.CertificatesReadyCondition: true}, s.done)
	assert.Equal(t, readiness.RollingOut("the API servers").Message, conditions.Get(s.hcp, v1alpha1.APIServerReadyCondition).Message)

	s = pass(&v1alpha1.HostedControlPlane{}, readiness.Problem(v1alpha1.EtcdUnhealthyReason, "member down"))
	assert.False(t, apiServers.rendered, "a bad situation of etcd stops the pass")
	assert.Equal(t, "waiting for "+v1alpha1.EtcdReadyCondition, conditions.Get(s.hcp, v1alpha1.APIServerReadyCondition).Message)

	passWith(&v1alpha1.HostedControlPlane{}, starting, &appsv1.Deployment{})
	assert.False(t, apiServers.rendered, "once the API servers' Deployment exists it changes only after etcd")

	answered := &v1alpha1.HostedControlPlane{}
	answered.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	pass(answered, starting)
	assert.False(t, apiServers.rendered, "after the first answer etcd comes before the API servers")

	restoring := &v1alpha1.HostedControlPlane{}
	restoring.Spec.Etcd.Restore = &v1alpha1.EtcdRestore{Snapshot: "latest"}
	pass(restoring, starting)
	assert.False(t, apiServers.rendered, "the API servers wait for the restored etcd")

	// Once etcd is ready, the controllers start with the first API server
	// of the control plane's version that is ready.
	passWithPods := func(hcp *v1alpha1.HostedControlPlane, pods ...corev1.Pod) *scope {
		members.out = readiness.Ready("3 etcd members ready")
		apiServers.rendered, controllers.rendered = false, false
		s := &scope{
			hcp: hcp, held: map[string]readiness.Outcome{}, done: map[string]bool{},
			facts: &facts{apiServer: &appsv1.Deployment{}, apiServerPods: &corev1.PodList{Items: pods}},
		}
		r.run(t.Context(), s, on, phases)
		return s
	}
	first := &v1alpha1.HostedControlPlane{}
	first.Spec.Version = "v1.36.3"
	passWithPods(first, apiServerPod("", "v1.36.3", false), apiServerPod("", "v1.36.3", false))
	assert.True(t, apiServers.rendered)
	assert.False(t, controllers.rendered, "no API server is ready yet")
	s = passWithPods(first, apiServerPod("", "v1.36.3", true), apiServerPod("", "v1.36.3", false))
	assert.True(t, controllers.rendered, "the controllers start with the first API server ready")
	assert.Equal(t, v1alpha1.APIServerReadyCondition, s.blocked.condition, "the API servers still hold Available")
	passWithPods(first, apiServerPod("", "v1.36.2", true), apiServerPod("", "v1.36.3", false))
	assert.False(t, controllers.rendered, "not beside an API server of another version")
	deleted := apiServerPod("", "v1.36.2", false)
	deleted.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	passWithPods(first, deleted, apiServerPod("", "v1.36.3", true))
	assert.True(t, controllers.rendered, "a pod going away does not count")

	answered = answered.DeepCopy()
	answered.Spec.Version = "v1.36.3"
	passWithPods(answered, apiServerPod("", "v1.36.3", true), apiServerPod("", "v1.36.3", false))
	assert.False(t, controllers.rendered, "after the first answer the controllers wait for every API server")
}

// On the workload side each phase stands alone: one that fails is told, and
// the others are still kept.
func TestRunKeepsEveryWorkloadPhase(t *testing.T) {
	r, on := onFakeCluster()
	on.repairs = true
	join := &fakeComponent{name: "join", condition: v1alpha1.NodeJoinReadyCondition, err: errors.New("no cluster CA yet")}
	dns := &fakeComponent{name: "coredns", condition: v1alpha1.CoreDNSReadyCondition, out: readiness.Waiting(v1alpha1.ProgressingReason, "rolling")}
	proxy := &fakeComponent{name: "kube-proxy", condition: v1alpha1.KubeProxyReadyCondition, out: readiness.Ready("rolled out")}
	s := &scope{hcp: &v1alpha1.HostedControlPlane{}}

	problems := r.run(t.Context(), s, on, phasesOf([]components.Component{join, dns, proxy}))
	assert.Equal(t, []error{errors.New("NodeJoinReady: no cluster CA yet")}, problems)
	assert.Nil(t, s.blocked, "nothing on the workload side holds the control plane")
	assert.True(t, dns.rendered)
	assert.True(t, proxy.rendered)
	assert.Equal(t, v1alpha1.ApplyFailedReason, conditions.Get(s.hcp, v1alpha1.NodeJoinReadyCondition).Reason)
	assert.Equal(t, v1alpha1.ProgressingReason, conditions.Get(s.hcp, v1alpha1.CoreDNSReadyCondition).Reason)
	assert.Equal(t, metav1.ConditionTrue, conditions.Get(s.hcp, v1alpha1.KubeProxyReadyCondition).Status)
}

// A control plane's Cluster is its owner; until Cluster API sets that
// reference, the one Cluster of its namespace whose controlPlaneRef names it,
// and none when two do, or when the only one is in another namespace or
// names another kind.
func TestClusterOf(t *testing.T) {
	hcp := &v1alpha1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo"}}
	naming := func(ns, name, kind string) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: kind, Name: "demo"}
		return c
	}
	owned := hcp.DeepCopy()
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "owner"}}
	for name, tc := range map[string]struct {
		hcp      *v1alpha1.HostedControlPlane
		clusters []client.Object
		want     string
	}{
		"owner":                        {owned, []client.Object{naming("ns", "owner", "HostedControlPlane"), naming("ns", "other", "HostedControlPlane")}, "owner"},
		"named, not owned yet":         {hcp, []client.Object{naming("ns", "demo", "HostedControlPlane")}, "demo"},
		"none":                         {hcp, nil, ""},
		"named by two":                 {hcp, []client.Object{naming("ns", "a", "HostedControlPlane"), naming("ns", "b", "HostedControlPlane")}, ""},
		"named from another namespace": {hcp, []client.Object{naming("other", "demo", "HostedControlPlane")}, ""},
		"another kind named":           {hcp, []client.Object{naming("ns", "demo", "KubeadmControlPlane")}, ""},
	} {
		c := fake.NewClientBuilder().WithScheme(observedKinds()).WithObjects(tc.clusters...).Build()
		got, err := (&Reconciler{client: c}).clusterOf(t.Context(), tc.hcp)
		require.NoError(t, err, name)
		if tc.want == "" {
			assert.Nil(t, got, name)
		} else if assert.NotNil(t, got, name) {
			assert.Equal(t, tc.want, got.Name, name)
		}
	}
}
