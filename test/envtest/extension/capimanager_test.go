package extension

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/hooks"
	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
)

// extensionConfigName is the ExtensionConfig the tests register, named as
// config/extension names it; handlers are known to Cluster API as
// <handler>.<extensionConfigName>, as config/samples/clusterclass.yaml uses
// them.
const extensionConfigName = "hcp-extension"

// retryAfterSeconds is what the tests' ExtensionConfig sets, so that a held
// upgrade is asked about again soon.
const retryAfterSeconds = 3

var (
	capiOnce sync.Once
	capiErr  error
)

// capiManager starts the real Cluster API core manager, built from source
// by `make capi-manager`, with ClusterClass and the Runtime SDK enabled, and
// registers the extension with it through an ExtensionConfig. It starts
// once per test binary and stops with it.
func capiManager(t *testing.T) {
	t.Helper()
	capiOnce.Do(func() { capiErr = startCAPIManager() })
	require.NoError(t, capiErr)
}

func startCAPIManager() error {
	bin := os.Getenv("CAPI_MANAGER")
	if bin == "" {
		return errors.New("CAPI_MANAGER is not set: run the tests with `make envtest`, which builds the Cluster API manager")
	}
	webhook, err := envtest.FreePort()
	if err != nil {
		return err
	}
	health, err := envtest.FreePort()
	if err != nil {
		return err
	}
	// Its webhooks serve with the test certificate, which only has to exist:
	// the API server is not configured to call them, and the topology
	// controller defaults and validates variables itself.
	p, err := envtest.StartProcess(bin, []string{"KUBECONFIG=" + env.Kubeconfig},
		"--feature-gates=ClusterTopology=true,RuntimeSDK=true",
		fmt.Sprintf("--webhook-port=%d", webhook), "--webhook-cert-dir="+env.WebhookCertDir(),
		fmt.Sprintf("--health-addr=127.0.0.1:%d", health), "--diagnostics-address=0",
		"--clustertopology-concurrency=2", "--v=2")
	if err != nil {
		return err
	}
	stopFuncs = append(stopFuncs, func() error {
		// Its own graceful shutdown takes up to 30s, and a worker of its
		// cluster cache may outlast that; how Cluster API stops is not what
		// these tests prove, so a slow stop is told, not failed.
		if err := p.Stop(time.Minute); err != nil {
			fmt.Fprintf(os.Stderr, "Cluster API manager did not stop cleanly: %v\n", tail(err.Error(), 20))
		}
		return nil
	})
	if err := p.WaitReady(fmt.Sprintf("http://127.0.0.1:%d/readyz", health), 2*time.Minute); err != nil {
		return fmt.Errorf("Cluster API manager: %w", err)
	}
	capiLog = p
	if err := convertThroughManager(webhook); err != nil {
		return err
	}
	return registerExtension()
}

// convertThroughManager points the conversion webhooks of the Cluster and
// ClusterClass CRDs at the running manager, as clusterctl and cert-manager's
// cainjector arrange in a real installation: manifests users already have
// are cluster.x-k8s.io/v1beta1, which the API server stores as v1beta2 only
// through that webhook.
func convertThroughManager(port int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"clusters.cluster.x-k8s.io", "clusterclasses.cluster.x-k8s.io"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig: &apiextensionsv1.WebhookClientConfig{
					URL:      ptr.To(fmt.Sprintf("https://127.0.0.1:%d/convert", port)),
					CABundle: env.WebhookCA(),
				},
				ConversionReviewVersions: []string{"v1", "v1beta1"},
			},
		}
		if err := k8s.Update(ctx, crd); err != nil {
			return fmt.Errorf("conversion webhook of %s: %w", name, err)
		}
	}
	return nil
}

// capiLog is the Cluster API manager's output, for failure messages.
var capiLog *envtest.Process

// registerExtension applies the ExtensionConfig as an operator would, and
// waits until Cluster API has discovered every handler.
func registerExtension() error {
	ec := &runtimev1.ExtensionConfig{
		ObjectMeta: metav1.ObjectMeta{Name: extensionConfigName},
		Spec: runtimev1.ExtensionConfigSpec{
			ClientConfig: runtimev1.ClientConfig{
				URL:      fmt.Sprintf("https://127.0.0.1:%d", extPort),
				CABundle: env.WebhookCA(),
			},
			NamespaceSelector: &metav1.LabelSelector{},
			Settings:          map[string]string{hooks.RetryAfterSetting: fmt.Sprint(retryAfterSeconds)},
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := k8s.Create(ctx, ec); err != nil {
		return fmt.Errorf("create ExtensionConfig: %w", err)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return err
		}
		if len(ec.Status.Handlers) == 9 {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("ExtensionConfig %s lists %d handlers, want 9: %+v\n%s", ec.Name, len(ec.Status.Handlers), ec.Status, capiLog.Output())
}
