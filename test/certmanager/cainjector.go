package certmanager

import (
	"context"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	"github.com/cert-manager/cert-manager/pkg/util"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// NewCAInjector is a manager running cert-manager's cainjector against the
// API server of cfg: it injects into Mutating and ValidatingWebhookConfigurations,
// APIServices and CustomResourceDefinitions (their conversion webhook) the
// CA of the Certificate or Secret their cert-manager.io/inject-ca-from or
// inject-ca-from-secret annotation names. opts sets the manager's own
// servers and leader election; its scheme and client are set here.
func NewCAInjector(ctx context.Context, cfg *rest.Config, opts manager.Options) (manager.Manager, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, cmapi.AddToScheme, apiextensionsv1.AddToScheme, apiregistrationv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	opts.Scheme = scheme
	// The injector watches only the metadata of Secrets and reads the one it
	// injects from straight from the API server, as cert-manager's does, so
	// that no Secret data is cached.
	opts.Client = client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}
	// The injector applies what it injects under the field manager named by
	// the user agent, cert-manager-cainjector as in cert-manager's own.
	mgr, err := manager.New(util.RestConfigWithUserAgent(cfg, "cainjector"), opts)
	if err != nil {
		return nil, err
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	})
	if err != nil {
		return nil, err
	}
	return mgr, nil
}
