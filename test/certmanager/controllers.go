package certmanager

import (
	"context"
	"fmt"
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
	"golang.org/x/sync/errgroup"

	// The issuer backends the Issuer and CertificateRequest controllers look
	// up by the kind of issuer; they register themselves when imported.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// Namespace is the cluster resource namespace of the controllers:
// ClusterIssuers read their Secrets (a CA ClusterIssuer's key pair) from
// here, as cert-manager installed by its Helm chart reads them from its own
// namespace.
const Namespace = "cert-manager"

// controllerNames issue from SelfSigned and CA Issuers and ClusterIssuers,
// under the names cert-manager registers them by. ACME, Vault, Venafi, the
// ingress and Gateway shims and the metrics controller stay off.
var controllerNames = []string{
	issuers.ControllerName, clusterissuers.ControllerName,
	// Signers wait for the Approved condition; with no policy engine
	// installed the approver grants it to every request, as in a default install.
	approver.ControllerName, crselfsigned.CRControllerName, crca.CRControllerName,
	trigger.ControllerName, keymanager.ControllerName, requestmanager.ControllerName,
	issuing.ControllerName, readiness.ControllerName, revisionmanager.ControllerName,
}

const (
	// workers is cert-manager's default number of workers per controller.
	workers = 5
	// syncTimeout bounds the wait for the first list of every watched kind,
	// so a missing CRD or an unreachable server fails the start.
	syncTimeout = time.Minute
)

// Controllers are cert-manager's controllers against one API server. Their
// Context holds the clients and the informer factories they share.
type Controllers struct {
	*controllerpkg.Context
	factory *controllerpkg.ContextFactory
}

// NewControllers prepares the controllers for the API server of kubeconfig,
// or, when kubeconfig is empty, of the pod they run in. Their logger is the
// one of ctx (cert-manager's logs.NewContext).
func NewControllers(ctx context.Context, kubeconfig string) (*Controllers, error) {
	factory, err := controllerpkg.NewContextFactory(ctx, options(kubeconfig))
	if err != nil {
		return nil, fmt.Errorf("controller context: %w", err)
	}
	// Every Context the factory builds shares its informer factories; this
	// one starts them once the controllers have registered their informers.
	c, err := factory.Build()
	if err != nil {
		return nil, fmt.Errorf("controller context: %w", err)
	}
	return &Controllers{Context: c, factory: factory}, nil
}

// options are cert-manager's defaults for the controllers run here.
func options(kubeconfig string) controllerpkg.ContextOptions {
	return controllerpkg.ContextOptions{
		Kubeconfig: kubeconfig,
		// Only used if the API server lacks priority and fairness.
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: Namespace},
		CertificateOptions: controllerpkg.CertificateOptions{
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	}
}

// Start builds each controller and runs it in group until ctx ends, then
// starts the informers and returns once they have listed every kind the
// controllers watch.
func (c *Controllers) Start(ctx context.Context, group *errgroup.Group) error {
	for _, name := range controllerNames {
		build, ok := controllerpkg.Known()[name]
		if !ok {
			return fmt.Errorf("cert-manager registers no controller %q", name)
		}
		ctrl, err := build(c.factory)
		if err != nil {
			return fmt.Errorf("build controller %s: %w", name, err)
		}
		group.Go(func() error {
			if err := ctrl.Run(workers, ctx); err != nil {
				return fmt.Errorf("controller %s: %w", name, err)
			}
			return nil
		})
	}
	c.SharedInformerFactory.Start(ctx.Done())
	c.KubeSharedInformerFactory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	var unsynced []string
	for kind, ok := range c.SharedInformerFactory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			unsynced = append(unsynced, kind.String())
		}
	}
	for kind, ok := range c.KubeSharedInformerFactory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			unsynced = append(unsynced, kind)
		}
	}
	if len(unsynced) > 0 {
		return fmt.Errorf("informers for %v did not sync within %s", unsynced, syncTimeout)
	}
	return nil
}

// Shutdown waits for the informers to stop once the context Start was
// given has ended.
func (c *Controllers) Shutdown() {
	c.KubeSharedInformerFactory.Shutdown()
	c.SharedInformerFactory.Shutdown()
}
