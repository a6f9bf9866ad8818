package local

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The quickstart's lines are added once, and removing them leaves the file
// as it was.
func TestHosts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hosts")
	before := "127.0.0.1 localhost\n10.0.0.1 demo.default.hcp.test\n"
	require.NoError(t, os.WriteFile(file, []byte(before), 0o644))
	for range 2 {
		require.NoError(t, AddHosts(file, "10.250.0.250", "demo.default.hcp.test"))
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, before+"10.250.0.250 demo.default.hcp.test # hostedcp-e2e\n", string(b))
	for range 2 {
		require.NoError(t, RemoveHosts(file))
	}
	b, err = os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, before, string(b))
}
