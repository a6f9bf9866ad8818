package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func (c *Cluster) startEtcd(ctx context.Context) error {
	listen := fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort)
	if err := c.start("etcd", c.cfg.Binaries.Etcd,
		"--name=management", "--data-dir="+c.layout.path("etcd"),
		"--listen-client-urls="+listen, "--advertise-client-urls="+listen,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=management="+peer,
		"--listen-metrics-urls=", "--unsafe-no-fsync", "--log-level=warn"); err != nil {
		return err
	}
	return c.poll(ctx, "etcd", time.Minute, c.urlReady(listen+"/health"))
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	pki := c.layout.pki
	if err := c.start("kube-apiserver", c.cfg.Binaries.APIServer,
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdClientPort),
		"--bind-address=0.0.0.0", fmt.Sprintf("--secure-port=%d", APIServerPort), "--advertise-address="+NodeIP,
		"--tls-cert-file="+pki("apiserver.crt"), "--tls-private-key-file="+pki("apiserver.key"),
		"--client-ca-file="+pki("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pki("sa.pub"), "--service-account-signing-key-file="+pki("sa.key"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--kubelet-client-certificate="+pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+pki("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false"); err != nil {
		return err
	}
	return c.poll(ctx, "kube-apiserver", 2*time.Minute, c.urlReady(fmt.Sprintf("https://127.0.0.1:%d/readyz", APIServerPort)))
}

func (c *Cluster) startControllers(ctx context.Context) error {
	pki := c.layout.pki
	kcm := c.layout.kubeconfig("controller-manager")
	if err := c.start("kube-controller-manager", c.cfg.Binaries.ControllerManager,
		"--kubeconfig="+kcm, "--authentication-kubeconfig="+kcm, "--authorization-kubeconfig="+kcm,
		"--service-account-private-key-file="+pki("sa.key"), "--root-ca-file="+pki("ca.crt"),
		"--cluster-signing-cert-file="+pki("ca.crt"), "--cluster-signing-key-file="+pki("ca.key"),
		"--use-service-account-credentials=true", "--leader-elect=false",
		"--service-cluster-ip-range="+ServiceCIDR, "--cluster-cidr="+PodCIDR,
		"--bind-address=127.0.0.1", "--secure-port=0", "--profiling=false"); err != nil {
		return err
	}
	scheduler := c.layout.kubeconfig("scheduler")
	if err := c.start("kube-scheduler", c.cfg.Binaries.Scheduler,
		"--kubeconfig="+scheduler, "--authentication-kubeconfig="+scheduler, "--authorization-kubeconfig="+scheduler,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0", "--profiling=false"); err != nil {
		return err
	}
	// The controller manager's service account controller makes the default
	// ServiceAccount of every namespace: proof that it runs.
	return c.poll(ctx, "kube-controller-manager", time.Minute, func(ctx context.Context) error {
		return c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{})
	})
}
