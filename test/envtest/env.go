package envtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// Env is a running test API server with every CRD the provider works with.
type Env struct {
	env *crenvtest.Environment
	// Config and Client reach the API server as cluster admin.
	Config *rest.Config
	Client client.Client
	// Kubeconfig is a file with the admin credentials, for binaries.
	Kubeconfig string
	// Root is the repository's top directory.
	Root string
	// auditLog records every write the API server accepts.
	auditLog string
	// dir holds this environment's audit log and kubeconfig files.
	dir string
}

// Scheme knows the kinds the tests create: core Kubernetes, this provider,
// Cluster API, cert-manager and Gateway API.
func Scheme() *k8sruntime.Scheme {
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{
		clientgoscheme.AddToScheme, v1alpha1.AddToScheme, clusterv1.AddToScheme, cmv1.AddToScheme, gatewayv1.Install, gatewayv1beta1.Install,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return scheme
}

// ModuleCRDs is where a module of go.mod keeps its CRDs.
type ModuleCRDs struct{ Module, Dir string }

// The CRDs of the projects the provider works with.
var (
	CAPICRDs        = ModuleCRDs{"sigs.k8s.io/cluster-api", "core/config/crd/bases"}
	CertManagerCRDs = ModuleCRDs{"github.com/cert-manager/cert-manager", "deploy/crds"}
	GatewayAPICRDs  = ModuleCRDs{"sigs.k8s.io/gateway-api", "config/crd/standard"}
)

// Path is the CRD directory in the module cache.
func (m ModuleCRDs) Path() (string, error) {
	dir, err := ModuleDir(m.Module)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, m.Dir), nil
}

// Start starts the API server with every CRD the provider works with.
func Start() (*Env, error) { return StartWith(CAPICRDs, CertManagerCRDs, GatewayAPICRDs) }

// StartWith starts the API server, installs the provider's CRDs and those of
// modules, and the provider's webhook configurations (pointing at 127.0.0.1
// with certificates in WebhookCertDir), and writes an admin kubeconfig.
func StartWith(modules ...ModuleCRDs) (*Env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make envtest`, which builds kube-apiserver and etcd")
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	crds := []string{filepath.Join(root, "config", "crd", "bases")}
	for _, m := range modules {
		dir, err := m.Path()
		if err != nil {
			return nil, err
		}
		crds = append(crds, dir)
	}
	e := &Env{Root: root, env: &crenvtest.Environment{
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: crenvtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(root, "config", "webhook")},
		},
	}}
	// One directory for the audit log and kubeconfigs, removed by Stop.
	if e.dir, err = os.MkdirTemp("", "hcp-envtest-"); err != nil {
		return nil, err
	}
	if err := e.configureAPIServer(); err != nil {
		return nil, errors.Join(err, os.RemoveAll(e.dir))
	}
	if e.Config, err = e.env.Start(); err != nil {
		return nil, fmt.Errorf("start test API server: %w", err)
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: Scheme()}); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	if e.Kubeconfig, err = e.writeKubeconfig(); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	return e, nil
}

func (e *Env) writeKubeconfig() (string, error) { return e.UserKubeconfig("admin") }

// UserKubeconfig writes a kubeconfig of a new cluster admin called name, whose
// requests the audit log tells apart, and returns its path.
func (e *Env) UserKubeconfig(name string) (string, error) {
	user, err := e.env.AddUser(crenvtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("add user %s: %w", name, err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("kubeconfig of %s: %w", name, err)
	}
	path := filepath.Join(e.dir, name+".kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// InstallCRDs installs the CRDs of a module into the running API server.
func (e *Env) InstallCRDs(m ModuleCRDs) error {
	dir, err := m.Path()
	if err != nil {
		return err
	}
	_, err = crenvtest.InstallCRDs(e.Config, crenvtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true})
	return err
}

// WebhookCertDir holds tls.crt and tls.key that the webhook configurations
// trust; WebhookPort is the port they call on 127.0.0.1.
func (e *Env) WebhookCertDir() string { return e.env.WebhookInstallOptions.LocalServingCertDir }

// WebhookPort is the port on 127.0.0.1 the webhook configurations call.
func (e *Env) WebhookPort() int { return e.env.WebhookInstallOptions.LocalServingPort }

// Stop stops the API server and etcd and removes the environment's files.
func (e *Env) Stop() error {
	err := e.env.Stop()
	return errors.Join(err, os.RemoveAll(e.dir))
}

// RepoRoot is the repository's top directory.
func RepoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the test sources")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
}

// ModuleDir is where a module of go.mod lies in the module cache; it is
// downloaded first if missing.
func ModuleDir(module string) (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no directory (%s)", module, info.Error)
	}
	return info.Dir, nil
}

// WebhookCA is the certificate authority that signed the certificate in
// WebhookCertDir, for clients of servers that use it.
func (e *Env) WebhookCA() []byte { return e.env.WebhookInstallOptions.LocalServingCAData }

// ControllerUser is the user the controller started by StartController acts
// as, so its writes can be counted apart from the tests' own.
const ControllerUser = "hosted-control-plane-controller"

// StartController builds cmd/controller into binDir and runs it as it runs
// in a cluster, serving the admission webhooks with the certificate the
// webhook configurations trust, and waits until it is ready. settings are
// more environment variables, such as ALLOWED_IMAGE_REGISTRIES=registry.k8s.io.
func (e *Env) StartController(binDir string, settings ...string) (*Process, error) {
	bin, err := Build(e.Root, "./cmd/controller", binDir)
	if err != nil {
		return nil, err
	}
	return e.StartControllerBinary(bin, settings...)
}

// StartControllerBinary is StartController with a controller built before,
// such as another release of it.
func (e *Env) StartControllerBinary(bin string, settings ...string) (*Process, error) {
	health, err := FreePort()
	if err != nil {
		return nil, err
	}
	metrics, err := FreePort()
	if err != nil {
		return nil, err
	}
	profiler, err := FreePort()
	if err != nil {
		return nil, err
	}
	kubeconfig, err := e.UserKubeconfig(ControllerUser)
	if err != nil {
		return nil, err
	}
	p, err := StartProcess(bin, append([]string{
		"KUBECONFIG=" + kubeconfig,
		"WEBHOOK_CERT_DIR=" + e.WebhookCertDir(),
		fmt.Sprintf("WEBHOOK_PORT=%d", e.WebhookPort()),
		fmt.Sprintf("HEALTH_PROBE_BIND_ADDRESS=127.0.0.1:%d", health),
		fmt.Sprintf("METRICS_BIND_ADDRESS=127.0.0.1:%d", metrics),
		fmt.Sprintf("PROFILER_ADDRESS=127.0.0.1:%d", profiler),
		"LEADER_ELECTION=false",
		"LOG_FORMAT=text",
	}, settings...))
	if err != nil {
		return nil, err
	}
	p.MetricsURL = fmt.Sprintf("https://127.0.0.1:%d/metrics", metrics)
	p.ProfilerURL = fmt.Sprintf("http://127.0.0.1:%d/debug/pprof", profiler)
	if err := p.WaitReady(fmt.Sprintf("http://127.0.0.1:%d/readyz", health), time.Minute); err != nil {
		return nil, errors.Join(fmt.Errorf("controller: %w", err), p.Stop(5*time.Second))
	}
	if err := p.WaitListening(fmt.Sprintf("127.0.0.1:%d", metrics), time.Minute); err != nil {
		return nil, errors.Join(fmt.Errorf("controller metrics: %w", err), p.Stop(5*time.Second))
	}
	return p, nil
}

// DecodeObject reads the next object of a YAML stream, skipping empty
// documents; it returns io.EOF after the last one.
func DecodeObject(d *utilyaml.YAMLOrJSONDecoder) (*unstructured.Unstructured, error) {
	for {
		obj := &unstructured.Unstructured{}
		if err := d.Decode(&obj.Object); err != nil {
			return nil, err
		}
		if len(obj.Object) > 0 {
			return obj, nil
		}
	}
}
