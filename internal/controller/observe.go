package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/rollout"
)

// observe builds the pass's Input once, before anything renders: from the
// control plane, its Cluster and the settings, and from what it reads of the
// clusters (where the control plane is served, what the Secrets its pods
// mount hold). What it cannot read yet holds the phase that needs it, with
// the outcome that says why, exactly as that phase would have said it.
func (r *Reconciler) observe(ctx context.Context, s *scope) {
	s.held, s.done = map[string]readiness.Outcome{}, map[string]bool{}
	in, err := render.NewInput(s.hcp, s.cluster, r.settings)
	if err != nil {
		reason := v1alpha1.ClusterNetworkMissingReason
		if errors.Is(err, render.ErrUnsupportedNetwork) {
			reason = v1alpha1.ClusterNetworkUnsupportedReason
		}
		s.held[v1alpha1.ClusterReadyCondition] = readiness.Problem(reason, "%v", err)
		return
	}
	stamp, later, err := rollout.NewStamp(s.hcp, r.settings, time.Now())
	if err != nil {
		s.held[v1alpha1.ClusterReadyCondition] = failure(err)
		return
	}
	s.stamp = stamp
	if !later.IsZero() {
		s.rollouts.wakeAt(later)
	}
	s.held[v1alpha1.ClusterReadyCondition] = readiness.Ready("Cluster " + s.cluster.Name + " is ready")
	o := render.Observed{Cilium: r.watches.watching(ciliumNetworkPolicy())}
	if out, held := r.observeExposure(ctx, s.hcp, in, &o); held {
		s.held[v1alpha1.ExposureReadyCondition] = out
	}
	// The audit webhook targets' tokens are among what the controller renders into
	// a Secret, so it is read before those Secrets are digested.
	if out, held := r.observeAuditTokens(ctx, s.hcp, &o); held {
		s.held[v1alpha1.APIServerReadyCondition] = out
	}
	if out, held := r.observeMounts(ctx, s.hcp, &o); held {
		s.held[v1alpha1.APIServerReadyCondition] = out
	}
	certs, err := r.observeSecrets(ctx, s.hcp, in, &o)
	if err != nil {
		s.held[v1alpha1.CertificatesReadyCondition] = failure(err)
	}
	// Checked with the cluster CA, which verifies the sidecar that serves
	// the keys.
	if out, held := r.observeManagementIssuer(ctx, s.hcp, in, &o); held {
		s.held[v1alpha1.APIServerReadyCondition] = out
	}
	s.certificates = certs
	r.observeEncryption(ctx, s, in, &o)
	s.facts = r.observeFacts(ctx, in)
	if pods := s.facts.etcdPods; pods != nil {
		m, asking, err := r.etcd.Membership(ctx, r.client, in, pods.Items, r.etcdAnswers)
		switch {
		case err != nil:
			s.held[v1alpha1.EtcdReadyCondition] = failure(err)
		case asking:
			s.etcdAsking = true
			s.held[v1alpha1.EtcdReadyCondition] = asWas(s.hcp, v1alpha1.EtcdReadyCondition)
		}
		o.Etcd = m
		if r := s.hcp.Status.Etcd.Restoring; r != nil {
			o.EtcdStalePods = etcd.StalePods(pods.Items, r.ID)
		}
	}
	if claims := s.facts.etcdClaims; claims != nil {
		o.EtcdVolumeCapacity = etcd.VolumeSize(claims.Items)
		o.EtcdVolumeRequest = etcd.VolumeRequest(claims.Items)
	}
	s.in = in.With(o)
	s.stamp.Rotation = rotationSteps(s.in)
	r.observeEtcdPresented(ctx, s)
}

// asWas is the outcome a condition already tells, for a phase that waits
// for an answer before it decides anything: the pass goes on as the one
// before went on, and the condition does not flap.
func asWas(hcp *v1alpha1.HostedControlPlane, condition string) readiness.Outcome {
	c := conditions.Get(hcp, condition)
	if c == nil {
		return readiness.Waiting(v1alpha1.EtcdUnhealthyReason, "waiting for etcd's first answer")
	}
	return readiness.Outcome{Done: c.Status == metav1.ConditionTrue, Reason: c.Reason, Message: c.Message}
}

// observeExposure finds where the control plane is served: behind a gateway
// its listener, which also gives the endpoint and the konnectivity port;
// otherwise what the exposure Service offers. A missing or unfit Gateway
// holds the exposure.
func (r *Reconciler) observeExposure(ctx context.Context, cp *v1alpha1.HostedControlPlane, in render.Input, o *render.Observed) (readiness.Outcome, bool) {
	var host string
	var port int32
	if gw := cp.Spec.Gateway; gw != nil {
		// Gateways are not ours and not in the label-scoped cache: the
		// Gateway cache holds them once it watches them, and until then
		// (their CRD installed after the controller started) they are read
		// live.
		gateway := &gatewayv1.Gateway{}
		from := r.apiReader
		if r.gateways != nil && r.watches.watching(gateway) {
			from = r.gateways
		}
		err := from.Get(ctx, client.ObjectKey{Namespace: gw.Namespace, Name: gw.Name}, gateway)
		if apierrors.IsNotFound(err) {
			return readiness.Problem(v1alpha1.GatewayNotFoundReason, "Gateway %s/%s does not exist: create it with a TLS passthrough listener on a wildcard hostname", gw.Namespace, gw.Name), true
		}
		if err != nil {
			return failure(err), true
		}
		listener, err := contract.FindGatewayListener(gateway)
		if err != nil {
			return readiness.Problem(v1alpha1.GatewayListenerReason, "%v", err), true
		}
		o.Listener, o.KonnectivityPort = &listener, listener.Port
		if o.RouteClaims, err = r.observeRouteClaims(ctx, cp, listener, components.RouteHostnames(in, listener)); err != nil {
			return failure(err), true
		}
		ep := listener.Endpoint(in.ClusterName(), in.Namespace())
		host, port = ep.Host, ep.Port
	} else {
		var err error
		if host, port, err = r.serviceEndpoint(ctx, cp, in, o); err != nil {
			return failure(err), true
		}
	}
	if host == "" || port == 0 {
		return readiness.Outcome{}, false // the exposure waits for an address
	}
	// What the user set stays; what is missing is filled in.
	o.Endpoint = cp.Spec.ControlPlaneEndpoint
	if o.Endpoint.Host == "" {
		o.Endpoint.Host = host
	}
	if o.Endpoint.Port == 0 {
		o.Endpoint.Port = port
	}
	return readiness.Outcome{}, false
}

// serviceEndpoint is where the exposure Service is reached, and where agents
// reach the konnectivity server through it; empty while it has no address.
func (r *Reconciler) serviceEndpoint(ctx context.Context, cp *v1alpha1.HostedControlPlane, in render.Input, o *render.Observed) (string, int32, error) {
	svc := &corev1.Service{}
	key := client.ObjectKey{Namespace: in.Namespace(), Name: contract.APIServerServiceName(in.ClusterName())}
	if err := r.client.Get(ctx, key, svc); err != nil {
		return "", 0, client.IgnoreNotFound(err)
	}
	o.KonnectivityPort = components.KonnectivityServicePort(svc)
	host, port, ok := components.ServiceEndpoint(cp, svc)
	if !ok {
		return "", 0, nil
	}
	if host == "" && svc.Spec.Type == corev1.ServiceTypeNodePort {
		// Nodes are not ours, so they are read past the label-scoped cache,
		// and only until the endpoint is recorded.
		nodes := &corev1.NodeList{}
		if err := r.apiReader.List(ctx, nodes); err != nil {
			return "", 0, fmt.Errorf("list nodes for a NodePort address: %w", err)
		}
		host = components.NodeAddress(nodes.Items)
	}
	return host, port, nil
}

// observeSecrets digests the Secrets the pods mount and reads the
// certificates rendering embeds (the admin's, the cluster CA). Those
// cert-manager issues are digested as they are, but for those of which the
// pods read only some keys at start (StartupKeys: the CA of those whose
// certificate and key they read again when renewed, the service account
// key) only those keys, so that a renewal rolls nothing. Those the controller writes itself are digested as they
// are rendered, so that pods roll in the pass that changes one, and not at
// all when one is deleted and written again. It returns the lifetimes of
// the certificates the Secrets hold.
func (r *Reconciler) observeSecrets(ctx context.Context, cp *v1alpha1.HostedControlPlane, in render.Input, o *render.Observed) ([]validity, error) {
	secrets := &corev1.SecretList{}
	if err := r.client.List(ctx, secrets, client.InNamespace(in.Namespace()), client.MatchingLabels{contract.ControlPlaneLabel: cp.Name}); err != nil {
		return nil, fmt.Errorf("list the control plane's secrets: %w", err)
	}
	certs := []validity{}
	o.SecretDigests, o.AuthoritySecrets, o.CACerts, o.Signers = map[string]string{}, map[string]render.AuthoritySecret{}, map[string][]byte{}, map[string]string{}
	authorities := map[string]bool{}
	for _, a := range in.Authorities() {
		authorities[a.Secret], authorities[a.Next] = true, true
	}
	for i := range secrets.Items {
		secret := &secrets.Items[i]
		if v, ok := certificateValidity(secret); ok {
			certs = append(certs, v)
			o.Signers[secret.Name] = v.signer
		}
		if ca := secret.Data[render.CAKey]; len(ca) > 0 {
			o.CACerts[secret.Name] = ca
		}
		if authorities[secret.Name] {
			o.AuthoritySecrets[secret.Name] = authoritySecret(secret)
		}
	}
	// What pods read at start can depend on what the CAs' Secrets hold
	// (the etcd CA's trust Secret, once the new CA is in its Secret).
	startup := components.StartupKeys(in.With(*o))
	for i := range secrets.Items {
		secret := &secrets.Items[i]
		read := secret.Data
		if keys, ok := startup[secret.Name]; ok {
			read = map[string][]byte{}
			for _, k := range keys {
				read[k] = secret.Data[k]
			}
		}
		o.SecretDigests[secret.Name] = contract.DataDigest(read)
		switch secret.Name {
		case components.AdminSecret(in):
			o.Admin = render.CredentialsFrom(secret.Data)
		case in.CASecret():
			o.ClusterCA = secret.Data[corev1.TLSCertKey]
		case contract.EtcdRestoreSecretName(in.ClusterName()):
			if metav1.IsControlledBy(secret, cp) {
				o.EtcdRestoreID = restoreID(cp, string(secret.Data[contract.EtcdRestoreIDKey]))
			}
		}
	}
	rendered, err := components.RenderedSecretDigests(in.With(*o))
	if err != nil {
		return certs, err
	}
	maps.Copy(o.SecretDigests, rendered)
	return certs, nil
}

// facts are what the status counts, as observed at the start of the pass;
// a list that could not be read is nil, and the status keeps what it said.
type facts struct {
	apiServer     *appsv1.Deployment
	apiServerPods *corev1.PodList
	etcdPods      *corev1.PodList
	etcdClaims    *corev1.PersistentVolumeClaimList
	selector      string
}

func (r *Reconciler) observeFacts(ctx context.Context, in render.Input) *facts {
	f := &facts{selector: in.SelectorString(contract.APIServerComponent)}
	d := &appsv1.Deployment{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: in.Namespace(), Name: components.APIServerName(in)}, d); err == nil {
		f.apiServer = d
	}
	of := func(component string) []client.ListOption {
		return []client.ListOption{client.InNamespace(in.Namespace()), client.MatchingLabels(in.Selector(component))}
	}
	if pods := (&corev1.PodList{}); r.client.List(ctx, pods, of(contract.APIServerComponent)...) == nil {
		f.apiServerPods = pods
	}
	if pods := (&corev1.PodList{}); r.client.List(ctx, pods, of(contract.EtcdComponent)...) == nil {
		f.etcdPods = pods
	}
	if claims := (&corev1.PersistentVolumeClaimList{}); r.client.List(ctx, claims, of(contract.EtcdComponent)...) == nil {
		f.etcdClaims = claims
	}
	return f
}

// probe reads the newest answer of the API server to /readyz through the
// admin kubeconfig (the one this pass wrote, or, when the pass stopped
// before writing it, the one written before, which still reaches the API
// server), and asks again, outside the workers, when it is older than
// probeFresh (see package probes): the pass never waits for the tenant's
// network, and an answer that differs brings the next pass at once.
func (r *Reconciler) probe(ctx context.Context, s *scope) {
	kubeconfig := s.kubeconfig
	if kubeconfig == nil {
		secret := &corev1.Secret{}
		key := client.ObjectKey{Namespace: s.hcp.Namespace, Name: contract.ClusterKubeconfigName(s.cluster.Name)}
		if err := r.client.Get(ctx, key, secret); err != nil {
			s.probed, s.answer = true, fmt.Errorf("no kubeconfig to reach the API server with: %w", err)
			return
		}
		kubeconfig = secret.Data["value"]
	}
	a, ok := r.probes.Answer(ctx, client.ObjectKeyFromObject(s.hcp), probeFresh, time.Now(), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, r.prober.Probe(ctx, kubeconfig)
	})
	s.probed, s.answer, s.asking = ok, a.Err, !ok
}

// restoreID is the restore in place the restore Secret is written for, when
// the status names it: the one under way, or the last one done. The backup
// controller writes the Secret before it records the restore, so a Secret
// written for a restore the status does not name yet changes nothing.
func restoreID(cp *v1alpha1.HostedControlPlane, written string) string {
	st := cp.Status.Etcd
	if written != "" && (st.Restoring != nil && st.Restoring.ID == written || st.RestoredFrom != nil && st.RestoredFrom.ID == written) {
		return written
	}
	return ""
}

// observeMounts digests the ConfigMaps and Secrets that
// spec.deployment.apiServer.mounts names, in the control plane's namespace.
// They are the user's, outside the label-scoped cache, so they are read
// past it; no watch reports their changes, so a change rolls the API
// servers at the next pass, within the probe interval. A source that does
// not exist holds the API servers, which keep running as they are.
func (r *Reconciler) observeMounts(ctx context.Context, cp *v1alpha1.HostedControlPlane, o *render.Observed) (readiness.Outcome, bool) {
	mounts := cp.Spec.Deployment.APIServer.Mounts
	if len(mounts) == 0 {
		return readiness.Outcome{}, false
	}
	o.MountDigests = map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(mounts)) {
		m := mounts[name]
		data, optional, err := r.mountData(ctx, cp.Namespace, m)
		switch {
		case apierrors.IsNotFound(err) && optional:
			o.MountDigests[name] = ""
		case apierrors.IsNotFound(err):
			return readiness.Problem(v1alpha1.MountNotFoundReason,
				"spec.deployment.apiServer.mounts[%s]: %s not found in namespace %s; create it or remove the mount", name, components.MountSource(m), cp.Namespace), true
		case err != nil:
			return failure(fmt.Errorf("read %s of spec.deployment.apiServer.mounts[%s]: %w", components.MountSource(m), name, err)), true
		default:
			o.MountDigests[name] = contract.DataDigest(data)
		}
	}
	return readiness.Outcome{}, false
}

// mountData is the content of a mount's source, and whether it may be
// missing.
func (r *Reconciler) mountData(ctx context.Context, ns string, m v1alpha1.Mount) (map[string][]byte, bool, error) {
	if m.ConfigMap != nil {
		cm := &corev1.ConfigMap{}
		err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.ConfigMap.Name}, cm)
		data := maps.Clone(cm.BinaryData)
		if data == nil {
			data = map[string][]byte{}
		}
		for k, v := range cm.Data {
			data[k] = []byte(v)
		}
		return data, ptr.Deref(m.ConfigMap.Optional, false), err
	}
	secret := &corev1.Secret{}
	if m.Secret == nil {
		return nil, false, nil
	}
	err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Secret.SecretName}, secret)
	return secret.Data, ptr.Deref(m.Secret.Optional, false), err
}
