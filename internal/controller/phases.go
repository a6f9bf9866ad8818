package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/apply"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// phase is one step of a pass; it owns one condition.
type phase struct {
	condition string
	run       func(context.Context, *scope) (readiness.Outcome, error)
}

// failure turns an error into the outcome that explains it.
func failure(err error) readiness.Outcome {
	var conflict *apply.ConflictError
	switch {
	case errors.As(err, &conflict):
		return readiness.Problem(v1alpha1.ConflictReason, "%v", err)
	case apimeta.IsNoMatchError(err) && strings.Contains(err.Error(), cmv1.SchemeGroupVersion.Group):
		return readiness.Problem(v1alpha1.CertManagerMissingReason, "cert-manager's CRDs are not installed: install cert-manager (v1.21 or later); retrying")
	case apimeta.IsNoMatchError(err) && strings.Contains(err.Error(), gatewayv1.GroupName):
		return readiness.Problem(v1alpha1.GatewayAPIMissingReason, "Gateway API CRDs (Gateway, TLSRoute v1) are not installed; install them or remove spec.gateway")
	default:
		return readiness.Problem(v1alpha1.ApplyFailedReason, "%v", err)
	}
}

// phases in the order they run; each needs the ones before it done.
func (r *Reconciler) phases() []phase {
	return []phase{
		{v1alpha1.ClusterReadyCondition, r.clusterPhase},
		{v1alpha1.ExposureReadyCondition, r.exposurePhase},
		{v1alpha1.CertificatesReadyCondition, r.certificatesPhase},
		{v1alpha1.KubeconfigReadyCondition, r.kubeconfigPhase},
		{v1alpha1.EtcdReadyCondition, r.etcdPhase},
		{v1alpha1.APIServerReadyCondition, r.apiServerPhase},
		{v1alpha1.ControllersReadyCondition, r.controllersPhase},
	}
}

// ownedConditions are the conditions this controller writes; on a conflict
// the patch helper keeps its own.
var ownedConditions = []string{
	v1alpha1.AvailableCondition, v1alpha1.ClusterReadyCondition, v1alpha1.ExposureReadyCondition,
	v1alpha1.CertificatesReadyCondition, v1alpha1.KubeconfigReadyCondition, v1alpha1.EtcdReadyCondition,
	v1alpha1.APIServerReadyCondition, v1alpha1.ControllersReadyCondition,
	v1alpha1.NodeJoinReadyCondition, v1alpha1.KubernetesServiceReadyCondition, v1alpha1.CoreDNSReadyCondition, v1alpha1.KubeProxyReadyCondition,
	v1alpha1.KonnectivityAgentReadyCondition,
}

func (r *Reconciler) clusterPhase(_ context.Context, s *scope) (readiness.Outcome, error) {
	in, err := components.NewInput(s.hcp, s.cluster, r.settings)
	if err != nil {
		return readiness.Problem(v1alpha1.ClusterNetworkMissingReason, "%v", err), nil
	}
	s.in = in
	return readiness.Ready("Cluster " + s.cluster.Name + " is ready"), nil
}

// apply applies objs in order; a conflict or failure ends the phase. It
// reports whether it wrote: the cache then still shows the old object, whose
// status says nothing about the new spec.
func (r *Reconciler) apply(ctx context.Context, objs ...client.Object) (bool, error) {
	wrote := false
	for _, obj := range objs {
		w, err := r.applier.Apply(ctx, obj)
		if err != nil {
			return wrote, err
		}
		wrote = wrote || w
	}
	return wrote, nil
}

func (r *Reconciler) exposurePhase(ctx context.Context, s *scope) (readiness.Outcome, error) {
	spec := s.hcp.Spec
	if gw := spec.Gateway; gw != nil {
		// Gateways are not ours and not in the label-scoped cache.
		gateway := &gatewayv1.Gateway{}
		err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: gw.Namespace, Name: gw.Name}, gateway)
		if apierrors.IsNotFound(err) {
			return readiness.Problem(v1alpha1.GatewayNotFoundReason, "Gateway %s/%s does not exist: create it with a TLS passthrough listener on a wildcard hostname", gw.Namespace, gw.Name), nil
		}
		if err != nil {
			return readiness.Outcome{}, err
		}
		listener, err := contract.FindGatewayListener(gateway)
		if err != nil {
			return readiness.Problem(v1alpha1.GatewayListenerReason, "%v", err), nil
		}
		s.in.Listener = &listener
	}
	objs := components.Exposure(s.in)
	if _, err := r.apply(ctx, objs...); err != nil {
		return readiness.Outcome{}, err
	}
	// Nothing is reported reachable before the Gateway routes to it.
	for _, obj := range objs {
		if route, ok := obj.(*gatewayv1.TLSRoute); ok {
			if out, accepted := r.routeAccepted(ctx, route); !accepted {
				return out, nil
			}
		}
	}
	host, port, err := r.endpoint(ctx, s)
	if err != nil {
		return readiness.Outcome{}, err
	}
	if host == "" || port == 0 {
		out := readiness.Waiting(v1alpha1.EndpointPendingReason, "waiting for an address of Service %s (type %s)",
			s.in.APIServerServiceName(), s.in.ExposureType())
		// A NodePort Service waits for a ready node, which is not watched.
		out.Poll = s.in.ExposureType() == corev1.ServiceTypeNodePort
		return out, nil
	}
	// What the user set stays; what is missing is filled in once.
	endpoint := &s.hcp.Spec.ControlPlaneEndpoint
	if endpoint.Host == "" {
		endpoint.Host = host
	}
	if endpoint.Port == 0 {
		endpoint.Port = port
	}
	s.in.Endpoint = *endpoint
	return readiness.Ready(fmt.Sprintf("served at https://%s:%d", s.in.Endpoint.Host, s.in.Endpoint.Port)), nil
}

// routeAccepted reads what the Gateway says of a TLSRoute it should route:
// accepted, with its references resolved, for the route's current spec.
// Otherwise the outcome carries the Gateway's own reason and message.
func (r *Reconciler) routeAccepted(ctx context.Context, want *gatewayv1.TLSRoute) (readiness.Outcome, bool) {
	parent := want.Spec.ParentRefs[0]
	gw := fmt.Sprintf("%s/%s", ptr.Deref(parent.Namespace, gatewayv1.Namespace(want.Namespace)), parent.Name)
	name := want.Namespace + "/" + want.Name
	pending := readiness.Waiting(v1alpha1.RoutePendingReason, "waiting for Gateway %s to accept TLSRoute %s", gw, name)
	route := &gatewayv1.TLSRoute{}
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(want), route); err != nil {
		return pending, false
	}
	for _, st := range route.Status.Parents {
		if !sameParent(st.ParentRef, parent, route.Namespace) {
			continue
		}
		for _, check := range []struct {
			condition gatewayv1.RouteConditionType
			reason    string
			says      string
		}{
			{gatewayv1.RouteConditionAccepted, v1alpha1.RouteNotAcceptedReason, "does not accept"},
			{gatewayv1.RouteConditionResolvedRefs, v1alpha1.RouteRefsUnresolvedReason, "cannot resolve the backend of"},
		} {
			c := apimeta.FindStatusCondition(st.Conditions, string(check.condition))
			switch {
			case c == nil || (c.ObservedGeneration != 0 && c.ObservedGeneration < route.Generation):
				return pending, false // not yet seen, or seen before the current spec
			case c.Status != metav1.ConditionTrue:
				return readiness.Problem(check.reason, "Gateway %s %s TLSRoute %s: %s: %s", gw, check.says, name, c.Reason, c.Message), false
			}
		}
		return readiness.Outcome{}, true
	}
	return pending, false
}

// sameParent tells whether a route's status is about the parent it names;
// an unset namespace is the route's own.
func sameParent(got, want gatewayv1.ParentReference, routeNamespace string) bool {
	ns := func(p gatewayv1.ParentReference) gatewayv1.Namespace {
		return ptr.Deref(p.Namespace, gatewayv1.Namespace(routeNamespace))
	}
	return got.Name == want.Name && ns(got) == ns(want) && ptr.Deref(got.SectionName, "") == ptr.Deref(want.SectionName, "")
}

// endpoint is where the API server is reached: the gateway hostname, or the
// address of the exposure Service; empty while there is none yet. It also
// records the konnectivity server's port, which comes from the same place.
func (r *Reconciler) endpoint(ctx context.Context, s *scope) (string, int32, error) {
	if l := s.in.Listener; l != nil {
		s.in.KonnectivityPort = l.Port
		ep := l.Endpoint(s.in.ClusterName(), s.in.Namespace())
		return ep.Host, ep.Port, nil
	}
	svc := &corev1.Service{}
	key := client.ObjectKey{Namespace: s.in.Namespace(), Name: s.in.APIServerServiceName()}
	if err := r.client.Get(ctx, key, svc); err != nil {
		return "", 0, client.IgnoreNotFound(err)
	}
	s.in.KonnectivityPort = components.KonnectivityServicePort(svc)
	host, port, ok := components.ServiceEndpoint(s.hcp, svc)
	if !ok {
		return "", 0, nil
	}
	if host == "" && svc.Spec.Type == corev1.ServiceTypeNodePort {
		var err error
		if host, err = r.nodeAddress(ctx); err != nil {
			return "", 0, err
		}
	}
	return host, port, nil
}

// nodeAddress is where a NodePort Service is reached when the user named
// no host: the external address of the first ready node of the management
// cluster by name, or its internal one. Nodes are not ours, so they are read
// past the label-scoped cache, and only until the endpoint is recorded.
func (r *Reconciler) nodeAddress(ctx context.Context) (string, error) {
	nodes := &corev1.NodeList{}
	if err := r.apiReader.List(ctx, nodes); err != nil {
		return "", fmt.Errorf("list nodes for a NodePort address: %w", err)
	}
	slices.SortFunc(nodes.Items, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes.Items {
		if !nodeReady(&n) {
			continue
		}
		for _, t := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
			for _, a := range n.Status.Addresses {
				if a.Type == t && a.Address != "" {
					return a.Address, nil
				}
			}
		}
	}
	return "", nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (r *Reconciler) certificatesPhase(ctx context.Context, s *scope) (readiness.Outcome, error) {
	objs := components.PKI(s.in)
	if _, err := r.apply(ctx, objs...); err != nil {
		return readiness.Outcome{}, err
	}
	var pending []string
	for _, obj := range objs {
		want, ok := obj.(*cmv1.Certificate)
		if !ok {
			continue
		}
		cert := &cmv1.Certificate{}
		if err := r.client.Get(ctx, client.ObjectKeyFromObject(want), cert); err != nil || !certificateReady(cert) {
			pending = append(pending, want.Name)
			continue
		}
		secret := &corev1.Secret{}
		if err := r.client.Get(ctx, client.ObjectKey{Namespace: want.Namespace, Name: want.Spec.SecretName}, secret); err != nil {
			pending = append(pending, want.Name)
			continue
		}
		s.in.SecretHashes[secret.Name] = contract.DataDigest(secret.Data)
	}
	if len(pending) > 0 {
		return readiness.Waiting(v1alpha1.IssuingReason, "waiting for cert-manager to issue %d of %d certificates: %s",
			len(pending), countCertificates(objs), strings.Join(pending, ", ")), nil
	}
	return readiness.Ready(fmt.Sprintf("all %d certificates issued", countCertificates(objs))), nil
}

func certificateReady(c *cmv1.Certificate) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == cmv1.CertificateConditionReady {
			return cond.Status == cmmeta.ConditionTrue && cond.ObservedGeneration == c.Generation
		}
	}
	return false
}

func countCertificates(objs []client.Object) int {
	n := 0
	for _, o := range objs {
		if _, ok := o.(*cmv1.Certificate); ok {
			n++
		}
	}
	return n
}

func (r *Reconciler) kubeconfigPhase(ctx context.Context, s *scope) (readiness.Outcome, error) {
	configs, err := components.Configs(s.in)
	if err != nil {
		return readiness.Outcome{}, err
	}
	for _, obj := range configs {
		if secret, ok := obj.(*corev1.Secret); ok {
			s.in.SecretHashes[secret.Name] = contract.DataDigest(secret.Data)
		}
	}
	admin := &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: s.in.Namespace(), Name: s.in.AdminCertSecret()}, admin); err != nil {
		return readiness.Outcome{}, fmt.Errorf("read admin certificate: %w", err)
	}
	kubeconfig, err := components.ClusterKubeconfig(s.in, admin)
	if err != nil {
		return readiness.Outcome{}, err
	}
	if _, err := r.apply(ctx, append(configs, kubeconfig)...); err != nil {
		return readiness.Outcome{}, err
	}
	s.kubeconfig = kubeconfig.Data["value"]
	return readiness.Ready("Secret " + kubeconfig.Name + " holds the admin kubeconfig"), nil
}

func (r *Reconciler) etcdPhase(ctx context.Context, s *scope) (readiness.Outcome, error) {
	if out, changing := r.etcdMembershipChange(ctx, s); changing {
		return out, nil
	}
	objs := components.Etcd(s.in)
	wrote, err := r.apply(ctx, objs...)
	if err != nil {
		return readiness.Outcome{}, err
	}
	if err := r.prune(ctx, s, contract.EtcdComponent, &policyv1.PodDisruptionBudgetList{}, objs); err != nil {
		return readiness.Outcome{}, err
	}
	if wrote {
		return readiness.RollingOut("etcd"), nil
	}
	sts := &appsv1.StatefulSet{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: s.in.Namespace(), Name: contract.EtcdName(s.in.ClusterName())}, sts); err != nil {
		return readiness.Outcome{}, err
	}
	want := s.in.EtcdReplicas()
	st := sts.Status
	if st.ObservedGeneration < sts.Generation || st.UpdatedReplicas != want || st.ReadyReplicas != want ||
		st.Replicas != want || (st.UpdateRevision != "" && st.CurrentRevision != st.UpdateRevision) {
		return readiness.Waiting(v1alpha1.ProgressingReason, "%d of %d etcd members ready, %d up to date",
			st.ReadyReplicas, want, st.UpdatedReplicas), nil
	}
	return readiness.Ready(fmt.Sprintf("%d etcd members ready", want)), nil
}

// etcdMembershipChange refuses to resize a running etcd: new members must be
// added to the cluster before they start, and removed members removed from
// it, which this controller does not do yet. Scaling the StatefulSet alone
// would break quorum or start members that cannot join.
func (r *Reconciler) etcdMembershipChange(ctx context.Context, s *scope) (readiness.Outcome, bool) {
	sts := &appsv1.StatefulSet{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: s.in.Namespace(), Name: contract.EtcdName(s.in.ClusterName())}, sts); err != nil {
		return readiness.Outcome{}, false
	}
	have, want := ptr.Deref(sts.Spec.Replicas, 0), s.in.EtcdReplicas()
	if have == want {
		return readiness.Outcome{}, false
	}
	return readiness.Problem(v1alpha1.EtcdMembershipReason,
		"etcd runs %d members and spec.etcd.replicas asks for %d: changing the members of a running etcd is not supported yet; set spec.etcd.replicas back to %d",
		have, want, have), true
}

func (r *Reconciler) apiServerPhase(ctx context.Context, s *scope) (readiness.Outcome, error) {
	objs := components.APIServer(s.in)
	wrote, err := r.apply(ctx, objs...)
	if err != nil {
		return readiness.Outcome{}, err
	}
	// Down to one API server, its disruption budget goes.
	if err := r.prune(ctx, s, contract.APIServerComponent, &policyv1.PodDisruptionBudgetList{}, objs); err != nil {
		return readiness.Outcome{}, err
	}
	if wrote {
		return readiness.RollingOut("the API servers"), nil
	}
	return r.deploymentsReady(ctx, s, s.in.APIServerName())
}

func (r *Reconciler) controllersPhase(ctx context.Context, s *scope) (readiness.Outcome, error) {
	wrote, err := r.apply(ctx, append(components.ControllerManager(s.in), components.Scheduler(s.in)...)...)
	if err != nil || wrote {
		return readiness.RollingOut("the controller manager and scheduler"), err
	}
	return r.deploymentsReady(ctx, s, s.in.ControllerManagerName(), s.in.SchedulerName())
}

// deploymentsReady is done when every named Deployment has rolled out.
func (r *Reconciler) deploymentsReady(ctx context.Context, s *scope, names ...string) (readiness.Outcome, error) {
	objs := make([]client.Object, len(names))
	for i, name := range names {
		objs[i] = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: s.in.Namespace(), Name: name}}
	}
	return readiness.RolledOut(ctx, r.client, objs, client.Object.GetName)
}

// prune deletes objects of list's kind and component that the control plane
// owns but no longer renders among objs. The component keeps one phase from
// pruning what another renders; the kind keeps a Deployment or Service from
// sparing the budget of the same name.
func (r *Reconciler) prune(ctx context.Context, s *scope, component string, list client.ObjectList, objs []client.Object) error {
	scheme := r.client.Scheme()
	listKind, err := apiutil.GVKForObject(list, scheme)
	if err != nil {
		return err
	}
	kind := strings.TrimSuffix(listKind.Kind, "List")
	keep := map[string]bool{}
	for _, o := range objs {
		gvk, err := apiutil.GVKForObject(o, scheme)
		if err != nil {
			return err
		}
		if gvk.Group == listKind.Group && gvk.Kind == kind {
			keep[o.GetName()] = true
		}
	}
	_, err = r.applier.Prune(ctx, list, s.hcp.UID, keep, client.InNamespace(s.in.Namespace()),
		client.MatchingLabels{contract.ControlPlaneLabel: s.hcp.Name, contract.ComponentLabel: component})
	return err
}
