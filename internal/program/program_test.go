package program

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: management
  cluster: {server: "https://192.0.2.1:6443"}
users:
- name: admin
  user: {token: secret}
contexts:
- name: management
  context: {cluster: management, user: admin}
current-context: management
`

// --kubeconfig wins over KUBECONFIG, and requests are limited by the API
// server's priority and fairness, as with controller-runtime's own flag.
func TestKubeconfigFlagWins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(kubeconfig), 0o600))
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
	cfg, err := restConfig(path)
	require.NoError(t, err)
	assert.Equal(t, "https://192.0.2.1:6443", cfg.Host)
	assert.Equal(t, "secret", cfg.BearerToken)
	assert.InDelta(t, -1, cfg.QPS, 0)
}

// Without the flag, KUBECONFIG is read as client-go reads it: a list of
// files.
func TestKubeconfigFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(kubeconfig), 0o600))
	t.Setenv("KUBECONFIG", filepath.Join(dir, "absent")+string(os.PathListSeparator)+path)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	cfg, err := restConfig("")
	require.NoError(t, err)
	assert.Equal(t, "https://192.0.2.1:6443", cfg.Host)
}
