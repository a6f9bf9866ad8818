package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/provider"
)

// ClusterConfig builds every binary and image that is missing and returns
// the configuration of a local cluster in dir that runs them.
func ClusterConfig(ctx context.Context, root, dir string, log io.Writer) (cluster.Config, error) {
	imgs, err := images.Ensure(ctx, root, log)
	if err != nil {
		return cluster.Config{}, err
	}
	bins := images.HostBinaries(root)
	cfg := cluster.Config{
		Dir: dir,
		Binaries: cluster.Binaries{
			Etcd: bins["etcd"], APIServer: bins["kube-apiserver"], ControllerManager: bins["kube-controller-manager"],
			Scheduler: bins["kube-scheduler"], Kubelet: bins["kubelet"], KubeProxy: bins["kube-proxy"],
		},
		Log: log,
	}
	for _, img := range imgs {
		cfg.Tarballs = append(cfg.Tarballs, img.Tar)
		switch {
		case strings.HasPrefix(img.Ref, "registry.k8s.io/pause:"):
			cfg.Images.Pause = img.Ref
		case img.Ref == "registry.k8s.io/kube-proxy:"+images.KubeVersion:
			cfg.Images.KubeProxy = img.Ref
		case img.Ref == images.KubeRouterImage:
			cfg.Images.KubeRouter = img.Ref
		case strings.HasPrefix(img.Ref, "registry.k8s.io/coredns/coredns:"):
			cfg.Images.CoreDNS = img.Ref
		}
	}
	return cfg, nil
}

// Install installs cert-manager, Cluster API, Traefik with the Gateway
// capi/capi-system, and the provider (from
// dist/control-plane-components.yaml) into the cluster c reaches; the
// provider is left out when withoutProvider is set, for clusterctl to
// install.
func Install(ctx context.Context, root string, c client.Client, withoutProvider bool) error {
	certManager, err := envtest.ModuleDir("github.com/cert-manager/cert-manager")
	if err != nil {
		return err
	}
	capi, err := envtest.ModuleDir("sigs.k8s.io/cluster-api")
	if err != nil {
		return err
	}
	gatewayAPI, err := envtest.GatewayAPICRDs.Path()
	if err != nil {
		return err
	}
	kustomize := os.Getenv("KUSTOMIZE")
	if kustomize == "" {
		return fmt.Errorf("KUSTOMIZE is not set: run through make, which builds kustomize into bin/")
	}
	return provider.Install(ctx, c, provider.Config{
		Root:             root,
		Kustomize:        kustomize,
		CertManagerCRDs:  filepath.Join(certManager, "deploy", "crds"),
		ClusterAPIConfig: filepath.Join(capi, "core", "config"),
		GatewayAPICRDs:   gatewayAPI,
		CertManagerImage: "hostedcp.test/cert-manager:" + images.CertManagerVersion,
		ClusterAPIImage:  "registry.k8s.io/cluster-api/cluster-api-controller:" + images.CAPIVersion,
		TraefikImage:     images.TraefikImage,
		WithoutProvider:  withoutProvider,
	})
}
