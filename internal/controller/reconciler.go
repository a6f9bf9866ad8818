package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/apply"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/backup"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/encryption"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/probes"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/rollout"
	cfg "github.com/hostedcp/cluster-api-provider-hosted/internal/settings"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/telemetry"
)

// Finalizer holds a HostedControlPlane until the Secrets cert-manager issued
// for it, which garbage collection cannot reach, are gone.
const Finalizer = "hostedcontrolplane.controlplane.cluster.x-k8s.io"

// How often an Available control plane is probed again, how soon one
// that is not yet answering is, and how soon a phase that waits for what no
// watch reports (an etcd learner catching up) looks again.
const (
	probeInterval = 2 * time.Minute
	retryInterval = 15 * time.Second // also how soon failed workload phases are tried again
	pollInterval  = 2 * time.Second
)

// At most probeWorkers API servers, and as many etcds, are asked at once,
// outside the reconcile workers; a pass asks an API server again when the
// answer it reads is older than probeFresh.
const (
	probeWorkers = 50
	probeFresh   = time.Second
)

// Reconciler keeps the objects of each HostedControlPlane as rendered.
type Reconciler struct {
	client client.Client
	// apiReader reads past the label-scoped cache: Gateways and Nodes, which
	// are not ours, and objects of our names that someone else created.
	apiReader client.Reader
	settings  render.Settings
	// registries are those image overrides may pull from (see imagesAllowed).
	registries contract.Registries
	recorder   events.EventRecorder
	// prober tells whether the API server answers through a kubeconfig;
	// probes asks it outside the workers and keeps its answers.
	prober Prober
	probes *probes.Pool[struct{}]
	// clusters reaches the workload clusters.
	clusters WorkloadClusters
	// issuers tells the management cluster's service account issuer.
	issuers IssuerSource
	// etcd reaches the hosted etcds, keeping each one's connections across
	// passes until the control plane is deleted.
	etcd *etcd.Checker
	// etcdAnswers asks etcd with it outside the workers and keeps its
	// answers (see etcd.Membership).
	etcdAnswers *probes.Pool[etcd.Seen]
	// etcdPresented asks etcd's members, outside the workers, which
	// certificates they present (see observeEtcdPresented).
	etcdPresented *probes.Pool[struct{}]

	// gateways is the Gateway cache: it reads every Gateway (see
	// observeExposure) and every TLSRoute, whoever's, by hostname (see
	// observeRouteClaims).
	gateways   client.Reader
	applier    *apply.Applier
	watches    *optionalWatches
	controller controller.Controller
	// told are the bad situations told in Warning events, by control plane
	// and condition (see record).
	told toldSituations
	// rewrites are the rewrites of Secrets under way (see rewriteSecrets).
	rewrites rewrites
	// restorer finds the snapshots etcd restores (see restore).
	restorer restorer
	// mustRoll hands out the fleet's turns to roll a change a release must
	// roll (see holder).
	mustRoll *rollout.Gate
}

// NewReconciler returns a Reconciler that reads through c, normally backed
// by the manager's label-scoped cache, and past it through apiReader, and
// reaches workload clusters through clusters.
func NewReconciler(c client.Client, apiReader client.Reader, settings render.Settings, registries contract.Registries,
	recorder events.EventRecorder, prober Prober, clusters WorkloadClusters,
) *Reconciler {
	return &Reconciler{
		client: c, apiReader: apiReader, settings: settings, registries: registries, recorder: recorder, prober: prober, clusters: clusters,
		etcd:        etcd.NewChecker(),
		probes:      probes.NewPool(probeWorkers, probes.Answered[struct{}]),
		etcdAnswers: etcd.NewAnswers(probeWorkers),
		// An answer is news when it turns from one member's certificate of
		// the old CA to every member's of the new.
		etcdPresented: probes.NewPool(probeWorkers, probes.Answered[struct{}]),
		restorer:      backup.NewRestorer(c, apiReader),
		mustRoll:      rollout.NewGate(cfg.DefaultMustRollInterval),
		applier:       &apply.Applier{Client: c, Reader: c, LiveReader: apiReader, Owner: contract.ManagedBy},
	}
}

// EtcdClients are the clients to the hosted etcd clusters the reconciler
// keeps, for the other controllers of the process to share (the backup
// controller streams snapshots through them).
func (r *Reconciler) EtcdClients() *etcd.Checker { return r.etcd }

// scope is what one pass over a control plane knows and what it recorded:
// the Input it built once from what it observed (observe.go), how far its
// phases got (phases.go), and what the API server said. The status is
// computed from it in one place (status.go).
type scope struct {
	hcp     *v1alpha1.HostedControlPlane
	cluster *clusterv1.Cluster
	// in is the pass's Input, built once by observe and then only read.
	in render.Input
	// stamp is what the pass writes on every workload (see rollout).
	stamp rollout.Stamp
	// rollouts are the renderings the pass held back.
	rollouts rollouts
	// held are outcomes observation decided before anything renders, by
	// condition: the Cluster's (ClusterReady) and what could not be observed
	// yet (a missing Gateway holds ExposureReady).
	held map[string]readiness.Outcome
	// facts are what the status counts; nil until the Input is built.
	facts *facts
	// done are the management phases done in this pass.
	done map[string]bool
	// blocked is the first phase of this pass that is not done; nil when
	// every phase is.
	blocked *blockedPhase
	// kubeconfig is the admin kubeconfig, when this pass wrote it.
	kubeconfig []byte
	// probed tells whether this pass read an answer of the API server;
	// answer is what it said (nil: it answered). asking tells that it asked
	// and no answer is held yet: the status keeps what it said.
	probed bool
	answer error
	asking bool
	// etcdAsking tells that etcd was asked and no answer this pass may
	// decide on is held yet: its phase and its status stay as they were.
	etcdAsking bool
	// etcdPresented is why not every etcd member presents certificates of
	// the new etcd CA while a rotation issues them from it (see
	// observeEtcdPresented); nil when each does, and outside that phase.
	etcdPresented error
	// keys are what the encryption Secret holds; nil when it holds nothing
	// the API servers can encrypt with (or could not be read).
	keys *encryption.Keys
	// encryptionSecret is the Secret with the encryption keys, as observed
	// (and as this pass wrote it); nil when it could not be read.
	encryptionSecret *corev1.Secret
	// encryptionRotation is what EncryptionReady says of a rotation of the
	// encryption key under way while no rewrite is due; nil outside one.
	encryptionRotation *readiness.Outcome
	// apiServersRolled: the API servers rolled out in this pass, and every
	// API server pod, terminating ones included, runs the template it
	// rendered (see apiServersRolled).
	apiServersRolled bool
	// rewritten is the rewrite of Secrets this pass finished; rewriting
	// says another page is due.
	rewritten *rewrite
	rewriting bool
	// connectionFailed tells that a request to the workload cluster did
	// not reach its API server, or was refused authentication.
	connectionFailed bool
	// soon is how soon the pass asks to come back at the latest, for what
	// no watch reports; zero when it does not ask.
	soon time.Duration
	// certificates are the lifetimes of the certificates the control
	// plane's Secrets hold; nil when they could not be read.
	certificates []validity
}

// blockedPhase is a phase that ended a pass, and how.
type blockedPhase struct {
	condition string
	readiness.Outcome
}

// answered tells whether the API server answered in this pass.
func (s *scope) answered() bool { return s.probed && s.answer == nil }

// Reconcile runs one pass over a HostedControlPlane.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	ctx, span := telemetry.Start(ctx, "reconcile", telemetry.Namespace.String(req.Namespace), telemetry.ControlPlane.String(req.Name))
	defer func() { telemetry.End(span, reterr) }()
	hcp := &v1alpha1.HostedControlPlane{}
	if err := r.client.Get(ctx, req.NamespacedName, hcp); err != nil {
		if apierrors.IsNotFound(err) {
			r.mustRoll.Done(req.String())
			fleet.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.watches.ensure(ctx)
	cluster, err := r.clusterOf(ctx, hcp)
	if err != nil {
		return ctrl.Result{}, err
	}
	if cluster != nil {
		span.SetAttributes(telemetry.Cluster.String(cluster.Name))
		if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.client, cluster, hcp); err != nil || isPaused || requeue {
			return ctrl.Result{Requeue: requeue}, err //nolint:staticcheck // Requeue is what EnsurePausedCondition asks for
		}
	}
	helper, err := patch.NewHelper(hcp, r.client)
	if err != nil {
		return ctrl.Result{}, err
	}
	s := &scope{hcp: hcp, cluster: cluster}
	initialized := ptr.Deref(hcp.Status.Initialization.ControlPlaneInitialized, false)
	defer func() {
		updateStatus(s)
		if err := helper.Patch(ctx, hcp, patch.WithOwnedConditions{Conditions: ownedConditions()}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, fmt.Errorf("patch HostedControlPlane: %w", err)})
			return
		}
		observePass(s, initialized)
	}()

	if cluster == nil {
		return ctrl.Result{}, nil // the Cluster's watch brings us back; updateStatus says what we wait for
	}
	if !hcp.DeletionTimestamp.IsZero() {
		ctx, span := telemetry.Start(ctx, "delete")
		result, err := r.reconcileDelete(ctx, s)
		telemetry.End(span, err)
		return result, err
	}
	if controllerutil.AddFinalizer(hcp, Finalizer) {
		// Stored before anything is created, so nothing can outlive it.
		return ctrl.Result{}, nil
	}
	result, err := r.reconcileNormal(ctx, s)
	r.tellPending(s)
	if s.soon > 0 && (result.RequeueAfter == 0 || result.RequeueAfter > s.soon) {
		result.RequeueAfter = s.soon
	}
	return s.sooner(result), err
}

// clusterOf is the Cluster of a control plane: its owner, or, until Cluster
// API's Cluster controller has set that reference (it takes a second or two
// after both are created), the one Cluster of its namespace whose
// spec.controlPlaneRef names it. Only a Cluster of the control plane's own
// namespace can name it, and two that both do leave it waiting for the
// owner reference. Nil when neither is found yet: the Cluster's watch
// brings the pass back.
func (r *Reconciler) clusterOf(ctx context.Context, hcp *v1alpha1.HostedControlPlane) (*clusterv1.Cluster, error) {
	cluster, err := util.GetOwnerCluster(ctx, r.client, hcp.ObjectMeta)
	if err != nil {
		return nil, fmt.Errorf("owner cluster: %w", err)
	}
	if cluster != nil {
		return cluster, nil
	}
	clusters := &clusterv1.ClusterList{}
	if err := r.client.List(ctx, clusters, client.InNamespace(hcp.Namespace)); err != nil {
		return nil, fmt.Errorf("list Clusters: %w", err)
	}
	var named *clusterv1.Cluster
	for i := range clusters.Items {
		if key, ok := controlPlaneOf(&clusters.Items[i]); ok && key == client.ObjectKeyFromObject(hcp) {
			if named != nil {
				return nil, nil //nolint:nilnil // named by two: the owner reference decides
			}
			named = &clusters.Items[i]
		}
	}
	return named, nil
}

// controlPlaneOf is the HostedControlPlane a Cluster's spec.controlPlaneRef
// names, in the Cluster's namespace; false when it names another kind.
func controlPlaneOf(cluster *clusterv1.Cluster) (client.ObjectKey, bool) {
	ref := cluster.Spec.ControlPlaneRef
	if ref.Kind != "HostedControlPlane" || ref.APIGroup != v1alpha1.GroupVersion.Group {
		return client.ObjectKey{}, false
	}
	return client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, true
}

// blockMoveMessage is the value of clusterctl's block-move annotation on
// every control plane: `clusterctl move` waits while it is there, and then
// fails naming the control plane.
const blockMoveMessage = "a hosted control plane cannot be moved by clusterctl move: its etcd data, volumes and pods stay " +
	"in this management cluster; move it by restoring an etcd snapshot into a new control plane in the target (spec.etcd.restore)"

// reconcileNormal observes, keeps the management side phase by phase until
// one is not done, probes the API server and, once it answers, keeps the
// workload side.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	metav1.SetMetaDataAnnotation(&s.hcp.ObjectMeta, clusterctlv1.BlockMoveAnnotation, blockMoveMessage)
	r.record(s.hcp, v1alpha1.ImagesAllowedCondition, imagesAllowed(s.hcp, r.registries))
	step(ctx, "observe", func(ctx context.Context) { r.observe(ctx, s) })
	r.recordRenewal(s)
	r.stopForRestore(ctx, s)
	r.run(ctx, s, r.management(), managementPhases(etcd.Component{Clients: r.etcd, Writer: r.client, Storage: r.apiReader, Events: r.recorder}))
	if !s.done[v1alpha1.CertificatesReadyCondition] {
		if err := r.unstickIssuances(ctx, s); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "unstick certificate issuances")
		}
	}
	r.restore(ctx, s)
	if s.in.ControlPlane != nil {
		s.apiServersRolled = r.apiServersRolled(s)
		r.rotateServiceAccountKey(ctx, s)
		r.rotateEncryptionKey(ctx, s)
		r.rotateAuthorities(ctx, s)
		r.takeRotations(ctx, s)
	}
	// Until the control plane first answers, nothing can answer before every
	// phase is done; afterwards it is probed whatever a phase waits for, so a
	// rollout or a certificate being issued again never hides an API server
	// that answers.
	if s.blocked == nil || ptr.Deref(s.hcp.Status.Initialization.ControlPlaneInitialized, false) {
		step(ctx, "probe", func(ctx context.Context) { r.probe(ctx, s) })
	}
	if b := s.blocked; b != nil && b.Warn {
		// A bad situation: retry with backoff.
		return ctrl.Result{}, fmt.Errorf("%s: %s", b.Reason, b.Message)
	}
	if !s.answered() {
		if s.probed || s.blocked != nil && s.blocked.Poll {
			return retryAfter(s, time.Now()), nil
		}
		// The objects the blocked phase waits for bring us back, or, when
		// every phase is done and the first answer since the controller
		// started is awaited, that answer's event (see package probes).
		return ctrl.Result{}, nil
	}
	// The workload cluster's components come once the API server answers;
	// their failures are theirs and leave the control plane Available. They
	// show in their conditions and events, and are tried again after
	// retryInterval, never later: a failure of the workload cluster returned
	// as an error would back off exponentially (up to 16 minutes in
	// controller-runtime) and hold back the management side's next step
	// (a rotation's phase) with it.
	if err := r.reconcileWorkload(ctx, s); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "workload cluster phases failed; retrying", "after", retryInterval)
		return ctrl.Result{RequeueAfter: retryInterval}, nil
	}
	if s.rewriting {
		return ctrl.Result{RequeueAfter: rewriteInterval}, nil
	}
	if s.blocked != nil && s.blocked.Poll {
		return ctrl.Result{RequeueAfter: pollInterval}, nil
	}
	return background(probeInterval), nil
}

// step runs a step of a pass in a span of its own, named name.
func step(ctx context.Context, name string, f func(context.Context)) {
	ctx, span := telemetry.Start(ctx, name)
	defer span.End()
	f(ctx)
}
