package envtest

import (
	"context"
	"encoding/pem"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hostedcp/cluster-api-provider-hosted/test/certmanager"
)

// cert-manager's cainjector, as the local management cluster runs it, copies
// the CA of the Certificate that a cert-manager.io/inject-ca-from annotation
// names into validating and mutating webhook configurations and into a
// CRD's conversion webhook, and adds the CA of another Certificate when the
// annotation names it.
func TestCertManagerCAInjector(t *testing.T) {
	parallel(t)
	ns := namespace(t)
	certificateAuthority(t, ns, "Issuer", "ca")
	mustCreate(t, ns, leafManifest("serving", "Issuer", "ca", ns))
	waitIssued(t, ns, "serving", 0)

	ctx, cancel := context.WithCancel(context.Background())
	injector, err := certmanager.NewCAInjector(ctx, env.Config, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	require.NoError(t, err)
	stopped := make(chan error, 1)
	go func() { stopped <- injector.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-stopped)
	})

	// env's client knows no CRDs as objects; this one does.
	scheme := Scheme()
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)

	inject := map[string]string{"cert-manager.io/inject-ca-from": ns + "/serving"}
	url := "https://127.0.0.1:1/never-called"
	webhook := func(name string) (admissionregistrationv1.WebhookClientConfig, []admissionregistrationv1.RuleWithOperations, *admissionregistrationv1.SideEffectClass) {
		none := admissionregistrationv1.SideEffectClassNone
		return admissionregistrationv1.WebhookClientConfig{URL: &url},
			[]admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{name + ".example.com"}, APIVersions: []string{"v1"}, Resources: []string{"nothing"}},
			}}, &none
	}
	vcc, rules, side := webhook(ns)
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	validating.Name, validating.Annotations = ns, inject
	validating.Webhooks = []admissionregistrationv1.ValidatingWebhook{{
		Name: "v." + ns + ".example.com", ClientConfig: vcc, Rules: rules, SideEffects: side, AdmissionReviewVersions: []string{"v1"},
	}}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	mutating.Name, mutating.Annotations = ns, inject
	mutating.Webhooks = []admissionregistrationv1.MutatingWebhook{{
		Name: "m." + ns + ".example.com", ClientConfig: vcc, Rules: rules, SideEffects: side, AdmissionReviewVersions: []string{"v1"},
	}}
	crd := conversionCRD(ns, url)
	crd.Annotations = inject
	for _, obj := range []client.Object{validating, mutating, crd} {
		require.NoError(t, c.Create(testContext(t), obj))
		t.Cleanup(func() { assert.NoError(t, client.IgnoreNotFound(c.Delete(context.Background(), obj))) })
	}

	waitInjected := func(t *testing.T, want ...[]byte) {
		t.Helper()
		start := time.Now()
		eventually(t, "CA bundles injected", func(ctx context.Context) (string, bool) {
			for _, obj := range []client.Object{validating, mutating, crd} {
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
					return err.Error(), false
				}
			}
			got := map[string][]byte{
				"validating": validating.Webhooks[0].ClientConfig.CABundle,
				"mutating":   mutating.Webhooks[0].ClientConfig.CABundle,
				"crd":        crd.Spec.Conversion.Webhook.ClientConfig.CABundle,
			}
			for what, bundle := range got {
				if got, want := certificates(bundle), certificates(want...); !slices.Equal(got, want) {
					return fmt.Sprintf("%s has %d certificates, want %d", what, len(got), len(want)), false
				}
			}
			return "", true
		})
		t.Logf("cainjector injected the CA in %s", since(start))
	}
	firstCA := secret(t, ns, "serving").Data["ca.crt"]
	waitInjected(t, firstCA)

	t.Run("another Certificate's CA joins it", func(t *testing.T) {
		caPEM := certificateAuthority(t, ns, "Issuer", "other-ca")
		mustCreate(t, ns, leafManifest("other", "Issuer", "other-ca", ns))
		waitIssued(t, ns, "other", 0)
		for _, obj := range []client.Object{validating, mutating, crd} {
			patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
			obj.SetAnnotations(map[string]string{"cert-manager.io/inject-ca-from": ns + "/other"})
			require.NoError(t, c.Patch(testContext(t), obj, patch))
		}
		// The first CA stays beside the new one, as clients trust both
		// while servers move to certificates from the new CA.
		waitInjected(t, firstCA, caPEM)
	})
}

// certificates are the DER certificates of the PEM bundles, sorted.
func certificates(bundles ...[]byte) []string {
	var out []string
	for _, rest := range bundles {
		for {
			var block *pem.Block
			if block, rest = pem.Decode(rest); block == nil {
				break
			}
			out = append(out, string(block.Bytes))
		}
	}
	slices.Sort(out)
	return out
}

// conversionCRD is a CRD of two versions converted by a webhook at url.
func conversionCRD(ns, url string) *apiextensionsv1.CustomResourceDefinition {
	group := ns + ".example.com"
	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}
	crd := &apiextensionsv1.CustomResourceDefinition{
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schema},
				{Name: "v2", Served: true, Schema: schema},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url},
					ConversionReviewVersions: []string{"v1"},
				},
			},
		},
	}
	crd.Name = "widgets." + group
	return crd
}
