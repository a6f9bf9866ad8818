package envtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/go-logr/logr/funcr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostedcp/cluster-api-provider-hosted/test/certmanager"
)

// CertManagerNamespace is the cluster resource namespace of the cert-manager
// StartCertManager runs: ClusterIssuers read their Secrets (a CA
// ClusterIssuer's key pair) from here. StartCertManager creates it.
const CertManagerNamespace = certmanager.Namespace

// certManager is one running set of cert-manager controllers.
type certManager struct {
	cancel      context.CancelFunc
	group       *errgroup.Group
	controllers *certmanager.Controllers // nil until built
	gate        *apiGate
	logs        *closableWriter
	dir         string
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
	if cm.controllers, err = certmanager.NewControllers(ctx, gated); err != nil {
		return err
	}
	if err := createNamespace(ctx, cm.controllers.Client, CertManagerNamespace); err != nil {
		return err
	}
	return cm.controllers.Start(ctx, cm.group)
}

// stop cancels everything, waits for the controllers' workers and the
// informers, then closes the gate on late event writes and the logs.
func (cm *certManager) stop() error {
	cm.cancel()
	err := cm.group.Wait()
	if cm.controllers != nil {
		cm.controllers.Shutdown()
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
func createNamespace(ctx context.Context, c kubernetes.Interface, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
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
