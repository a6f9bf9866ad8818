package envtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/go-logr/logr/funcr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	// The issuer backends the Issuer and CertificateRequest controllers look
	// up by the kind of issuer; they register themselves when imported.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// CertManagerNamespace is the cluster resource namespace of the cert-manager
// StartCertManager runs: ClusterIssuers read their Secrets (a CA
// ClusterIssuer's key pair) from here, as cert-manager installed by its Helm
// chart reads them from its own namespace. StartCertManager creates it.
const CertManagerNamespace = "cert-manager"

// certManagerControllers issue from SelfSigned and CA Issuers and
// ClusterIssuers, under the names cert-manager registers them by. ACME,
// Vault, Venafi, the ingress and Gateway shims and the metrics controller
// stay off.
var certManagerControllers = []string{
	issuers.ControllerName, clusterissuers.ControllerName,
	// Signers wait for the Approved condition; with no policy engine
	// installed the approver grants it to every request, as in a default install.
	approver.ControllerName, crselfsigned.CRControllerName, crca.CRControllerName,
	trigger.ControllerName, keymanager.ControllerName, requestmanager.ControllerName,
	issuing.ControllerName, readiness.ControllerName, revisionmanager.ControllerName,
}

const (
	// certManagerWorkers is cert-manager's default number of workers per controller.
	certManagerWorkers = 5
	// certManagerSyncTimeout bounds the wait for the first list of every
	// watched kind, so a missing CRD or an unreachable server fails the start.
	certManagerSyncTimeout = time.Minute
)

// certManager is one running set of cert-manager controllers.
type certManager struct {
	cancel    context.CancelFunc
	group     *errgroup.Group
	informers *controllerpkg.Context // nil until the controllers are built
	gate      *apiGate
	logs      *closableWriter
	dir       string
}

// StartCertManager runs cert-manager's own controllers in this process
// against the API server of kubeconfig, without leader election, metrics or
// health servers, and returns once they watch every kind they need. Their
// errors go to logs (nil drops them); the rest stays out, as cert-manager
// reports routine update conflicts at its most important level.
//
// stop ends the controllers and their informers and waits for them; once it
// returns, nothing of this cert-manager reaches the API server or logs.
func StartCertManager(ctx context.Context, kubeconfig string, logs io.Writer) (stop func() error, err error) {
	cm := &certManager{logs: &closableWriter{w: logs}}
	if logs == nil {
		cm.logs.w = io.Discard
	}
	ctx = logf.NewContext(ctx, funcr.New(func(prefix, args string) {
		_, _ = fmt.Fprintln(cm.logs, strings.TrimSuffix("cert-manager/"+prefix, "/"), args)
	}, funcr.Options{Verbosity: -1}))
	ctx, cm.cancel = context.WithCancel(ctx)
	cm.group, ctx = errgroup.WithContext(ctx)
	if err := cm.start(ctx, kubeconfig); err != nil {
		return nil, errors.Join(fmt.Errorf("start cert-manager: %w", err), cm.stop())
	}
	return cm.stop, nil
}

func (cm *certManager) start(ctx context.Context, kubeconfig string) error {
	var err error
	if cm.dir, err = os.MkdirTemp("", "cert-manager-"); err != nil {
		return err
	}
	if cm.gate, err = newAPIGate(); err != nil {
		return err
	}
	gated, err := cm.gate.kubeconfig(kubeconfig, cm.dir)
	if err != nil {
		return err
	}
	factory, err := controllerpkg.NewContextFactory(ctx, certManagerOptions(gated))
	if err != nil {
		return fmt.Errorf("controller context: %w", err)
	}
	// Every Context the factory builds shares its informer factories; this one
	// starts them once the controllers have registered their informers.
	if cm.informers, err = factory.Build(); err != nil {
		return fmt.Errorf("controller context: %w", err)
	}
	if err := createNamespace(ctx, cm.informers, CertManagerNamespace); err != nil {
		return err
	}
	for _, name := range certManagerControllers {
		if err := cm.run(ctx, factory, name); err != nil {
			return err
		}
	}
	return cm.startInformers(ctx)
}

// certManagerOptions are cert-manager's defaults for the controllers run here.
func certManagerOptions(kubeconfig string) controllerpkg.ContextOptions {
	return controllerpkg.ContextOptions{
		Kubeconfig: kubeconfig,
		// Only used if the API server lacks priority and fairness.
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: CertManagerNamespace},
		CertificateOptions: controllerpkg.CertificateOptions{
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	}
}

// run builds the controller registered as name and runs it until ctx ends.
func (cm *certManager) run(ctx context.Context, factory *controllerpkg.ContextFactory, name string) error {
	build, ok := controllerpkg.Known()[name]
	if !ok {
		return fmt.Errorf("cert-manager registers no controller %q", name)
	}
	ctrl, err := build(factory)
	if err != nil {
		return fmt.Errorf("build controller %s: %w", name, err)
	}
	cm.group.Go(func() error {
		if err := ctrl.Run(certManagerWorkers, ctx); err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		return nil
	})
	return nil
}

func (cm *certManager) startInformers(ctx context.Context) error {
	cm.informers.SharedInformerFactory.Start(ctx.Done())
	cm.informers.KubeSharedInformerFactory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, certManagerSyncTimeout)
	defer cancel()
	var unsynced []string
	for kind, ok := range cm.informers.SharedInformerFactory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			unsynced = append(unsynced, kind.String())
		}
	}
	for kind, ok := range cm.informers.KubeSharedInformerFactory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			unsynced = append(unsynced, kind)
		}
	}
	if len(unsynced) > 0 {
		return fmt.Errorf("informers for %v did not sync within %s", unsynced, certManagerSyncTimeout)
	}
	return nil
}

// stop cancels everything, waits for the controllers' workers and the
// informers, then closes the gate on late event writes and the logs.
func (cm *certManager) stop() error {
	cm.cancel()
	err := cm.group.Wait()
	if cm.informers != nil {
		cm.informers.KubeSharedInformerFactory.Shutdown()
		cm.informers.SharedInformerFactory.Shutdown()
	}
	if cm.gate != nil {
		cm.gate.close()
	}
	cm.logs.close()
	if cm.dir != "" {
		err = errors.Join(err, os.RemoveAll(cm.dir))
	}
	return err
}

// createNamespace creates namespace name unless it exists.
func createNamespace(ctx context.Context, c *controllerpkg.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// closableWriter passes writes to w until closed and drops them after, so
// no goroutine cert-manager leaves behind writes to w once stop returned.
type closableWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (c *closableWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w == nil {
		return len(p), nil
	}
	return c.w.Write(p)
}

func (c *closableWriter) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.w = nil
}
