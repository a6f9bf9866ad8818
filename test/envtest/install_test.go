package envtest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The install bundle users apply (make manifests) is accepted by a real API
// server with Cluster API's and cert-manager's CRDs, object by object.
func TestInstallBundleApplies(t *testing.T) {
	parallel(t)
	data, err := os.ReadFile(filepath.Join(env.Root, "dist", "control-plane-components.yaml"))
	require.NoError(t, err, "run `make manifests` first")
	ctx := testContext(t)
	reader := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	kinds := map[string]int{}
	for {
		obj, err := DecodeObject(reader)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		kinds[obj.GetKind()]++
		if obj.GetKind() == "Namespace" {
			// Created for real so the namespaced objects can be checked in it.
			ns := &corev1.Namespace{}
			ns.Name = obj.GetName()
			if err := env.Client.Create(ctx, ns); !apierrors.IsAlreadyExists(err) {
				require.NoError(t, err)
			}
			continue
		}
		// Dry run: the webhook configurations would otherwise send the other
		// tests' requests to a Service that does not run here.
		err = env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("install-test"), client.ForceOwnership, client.DryRunAll)
		assert.NoError(t, err, "%s %s", obj.GetKind(), obj.GetName())
	}
	for _, kind := range []string{
		"CustomResourceDefinition", "Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
		"Service", "Issuer", "Certificate", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ExtensionConfig",
	} {
		assert.Positive(t, kinds[kind], "the bundle has a %s", kind)
	}
}
