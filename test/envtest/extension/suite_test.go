package extension

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/webhooks"
	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
)

// The environment every test and benchmark of this package shares: the API
// server, the HostedControlPlane admission webhooks, and the real extension
// binary. The Cluster API manager starts with the first test that needs it
// (see capiManager).
var (
	env       *envtest.Env
	k8s       client.Client
	binDir    string
	ext       *envtest.Process
	extPort   int
	stopFuncs []func() error
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	defer func() {
		for i := len(stopFuncs) - 1; i >= 0; i-- {
			if err := stopFuncs[i](); err != nil {
				fmt.Fprintln(os.Stderr, err)
				code = 1
			}
		}
	}()
	if err := setUp(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func setUp() error {
	var err error
	if env, err = envtest.Start(); err != nil {
		return err
	}
	stopFuncs = append(stopFuncs, env.Stop)
	if k8s, err = client.New(env.Config, client.Options{Scheme: scheme()}); err != nil {
		return err
	}
	if binDir, err = os.MkdirTemp("", "hcp-ext-bin-"); err != nil {
		return err
	}
	stopFuncs = append(stopFuncs, func() error { return os.RemoveAll(binDir) })
	if err := startAdmission(); err != nil {
		return err
	}
	if err := applyFile(filepath.Join(env.Root, "test", "envtest", "extension", "testdata", "infrastructure.yaml"), ""); err != nil {
		return err
	}
	if err := waitForKind("infrastructure.hostedcp.test/v1alpha1", "TestClusterTemplateList"); err != nil {
		return err
	}
	if ext, extPort, err = startExtension(); err != nil {
		return err
	}
	stopFuncs = append(stopFuncs, func() error { return ext.Stop(30 * time.Second) })
	return nil
}

// startAdmission serves the provider's admission webhooks (internal/webhooks,
// as cmd/controller serves them) where the API server calls them, without
// the reconciler: the hosted control planes' pods cannot run in these tests
// (no kubelet), so the tests report the status the controller would, and a
// reconciler reporting the pods missing would contradict them.
func startAdmission() error {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: "127.0.0.1", Port: env.WebhookPort(), CertDir: env.WebhookCertDir(),
		}),
	})
	if err != nil {
		return err
	}
	if err := (webhooks.HostedControlPlane{}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (webhooks.HostedControlPlaneTemplate{}).SetupWithManager(mgr); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopFuncs = append(stopFuncs, func() error { cancel(); return <-done })
	for range 100 {
		if mgr.GetWebhookServer().StartedChecker()(nil) == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("the admission webhooks did not start")
}

func scheme() *k8sruntime.Scheme {
	s := envtest.Scheme()
	for _, add := range []func(*k8sruntime.Scheme) error{runtimev1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// startExtension builds cmd/extension and runs it as its Deployment does,
// serving TLS on 127.0.0.1 with the certificate the test API server's
// webhook configurations trust (it has the IP SAN 127.0.0.1).
func startExtension() (*envtest.Process, int, error) {
	bin, err := envtest.Build(env.Root, "./cmd/extension", binDir)
	if err != nil {
		return nil, 0, err
	}
	port, err := envtest.FreePort()
	if err != nil {
		return nil, 0, err
	}
	health, err := envtest.FreePort()
	if err != nil {
		return nil, 0, err
	}
	p, err := envtest.StartProcess(bin, []string{
		"KUBECONFIG=" + env.Kubeconfig, "WEBHOOK_CERT_DIR=" + env.WebhookCertDir(), "LOG_FORMAT=text",
		fmt.Sprintf("WEBHOOK_PORT=%d", port), fmt.Sprintf("HEALTH_PROBE_BIND_ADDRESS=127.0.0.1:%d", health), "METRICS_BIND_ADDRESS=0",
	})
	if err != nil {
		return nil, 0, err
	}
	if err := p.WaitReady(fmt.Sprintf("http://127.0.0.1:%d/readyz", health), time.Minute); err != nil {
		return nil, 0, errors.Join(fmt.Errorf("extension: %w", err), p.Stop(5*time.Second))
	}
	return p, port, nil
}

// waitForKind waits until the API server serves a kind whose CRD was just
// created.
func waitForKind(apiVersion, listKind string) error {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(apiVersion)
	list.SetKind(listKind)
	var err error
	for range 100 {
		if err = k8s.List(context.Background(), list); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s %s is not served: %w", apiVersion, listKind, err)
}

// applyFile creates every object of a YAML file, in namespace ns when set.
func applyFile(path, ns string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj, err := envtest.DecodeObject(d)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if ns != "" {
			obj.SetNamespace(ns)
		}
		if err := k8s.Create(context.Background(), obj); err != nil {
			return fmt.Errorf("%s: create %s %s: %w", path, obj.GetKind(), obj.GetName(), err)
		}
	}
}

// testContext bounds each test's calls.
func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// namespace creates a namespace for one test.
func namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ext-"}}
	if err := k8s.Create(testContext(t), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}
