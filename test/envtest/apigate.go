package envtest

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// apiGateProvider is the client-go auth provider plugin through which a
// kubeconfig file routes a client's requests through an apiGate.
const apiGateProvider = "hcp-envtest-api-gate"

var (
	registerGateProvider sync.Once
	errGateProvider      error
	gates                sync.Map // id → *apiGate
	lastGateID           atomic.Uint64
)

// apiGate lets requests through to the API server until closed, and refuses
// them after. It exists for cert-manager's event recorders: its
// ContextFactory gives every controller a client-go event broadcaster that
// nothing can shut down, and whose goroutine would keep sending Events after
// the controllers stopped. cert-manager builds every client from a
// kubeconfig file, so an auth provider named in that file is the one place
// to stand between those goroutines and the API server.
type apiGate struct {
	id string
	// mu is held for reading by each request in flight, so close waits for
	// them.
	mu         sync.RWMutex
	closed     bool
	transports []http.RoundTripper
}

func newAPIGate() (*apiGate, error) {
	registerGateProvider.Do(func() {
		errGateProvider = rest.RegisterAuthProviderPlugin(apiGateProvider, gateFor)
	})
	if errGateProvider != nil {
		return nil, fmt.Errorf("register auth provider %s: %w", apiGateProvider, errGateProvider)
	}
	g := &apiGate{id: strconv.FormatUint(lastGateID.Add(1), 10)}
	gates.Store(g.id, g)
	return g, nil
}

// gateFor is the auth provider plugin: it finds the gate a kubeconfig names.
func gateFor(_ string, config map[string]string, _ rest.AuthProviderConfigPersister) (rest.AuthProvider, error) {
	g, ok := gates.Load(config["id"])
	if !ok {
		return nil, fmt.Errorf("no API gate %q in this process", config["id"])
	}
	return g.(*apiGate), nil
}

// kubeconfig writes into dir a copy of the kubeconfig file src whose current
// user sends every request through g, and returns its path.
func (g *apiGate) kubeconfig(src, dir string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return "", fmt.Errorf("read kubeconfig: %w", err)
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || cfg.AuthInfos[kctx.AuthInfo] == nil {
		return "", fmt.Errorf("kubeconfig %s: no user for current context %q", src, cfg.CurrentContext)
	}
	cfg.AuthInfos[kctx.AuthInfo].AuthProvider = &clientcmdapi.AuthProviderConfig{
		Name: apiGateProvider, Config: map[string]string{"id": g.id},
	}
	path := filepath.Join(dir, "gated.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return path, nil
}

// WrapTransport puts the gate in front of a client's transport.
func (g *apiGate) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.transports = append(g.transports, rt)
	return &gatedTransport{gate: g, next: rt}
}

// Login has nothing to do: the kubeconfig's own credentials authenticate.
func (g *apiGate) Login() error { return nil }

// close waits for requests in flight, refuses any later ones, and closes
// the idle connections the clients kept open.
func (g *apiGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for _, rt := range g.transports {
		utilnet.CloseIdleConnectionsFor(rt)
	}
	gates.Delete(g.id)
}

type gatedTransport struct {
	gate *apiGate
	next http.RoundTripper
}

func (t *gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.gate.mu.RLock()
	defer t.gate.mu.RUnlock()
	if t.gate.closed {
		return refused(req), nil
	}
	return t.next.RoundTrip(req)
}

// WrappedRoundTripper lets client-go reach the transport underneath.
func (t *gatedTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// refused answers in place of the API server once the gate is closed. A
// Forbidden status, unlike a transport error, makes client-go's event
// recorder drop the Event at once instead of retrying it for minutes.
func refused(req *http.Request) *http.Response {
	const body = `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,` +
		`"message":"the cert-manager controllers in this process have stopped"}`
	return &http.Response{
		Status:        "403 Forbidden",
		StatusCode:    http.StatusForbidden,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
