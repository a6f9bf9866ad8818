package envtest

import (
	"context"
	"fmt"
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
// CRD's conversion webhook, and copies it again when the CA changes.
func TestCertManagerCAInjector(t *testing.T) {
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

	waitInjected := func(want []byte) {
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
				if string(bundle) != string(want) {
					return fmt.Sprintf("%s has %d bytes", what, len(bundle)), false
				}
			}
			return "", true
		})
		t.Logf("cainjector injected the CA in %s", since(start))
	}
	waitInjected(secret(t, ns, "serving").Data["ca.crt"])

	t.Run("a new CA is injected again", func(t *testing.T) {
		s := secret(t, ns, "serving")
		s.Data["ca.crt"] = []byte("replaced")
		require.NoError(t, env.Client.Update(testContext(t), s))
		waitInjected([]byte("replaced"))
	})
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
