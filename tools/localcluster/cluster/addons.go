package cluster

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"text/template"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

//go:embed manifests
var manifests embed.FS

// FieldOwner is the field manager of everything the harness applies.
const FieldOwner = "hostedcp-e2e"

const (
	// StorageClass is the cluster's default StorageClass.
	StorageClass = "local"
	provisioner  = "e2e.hostedcp.io/host-path"
)

// startAddons runs kube-proxy, kube-router (which enforces NetworkPolicies)
// and CoreDNS as pods, installs the default StorageClass, starts the
// cluster's own loops (LoadBalancer addresses and volumes) and waits until
// kube-proxy, kube-router and CoreDNS are available; kube-router and CoreDNS
// start once the API server's Service answers through kube-proxy.
func (c *Cluster) startAddons(ctx context.Context) error {
	data := map[string]string{
		"APIServer":          "https://" + net.JoinHostPort(NodeIP, fmt.Sprint(APIServerPort)),
		"PodCIDR":            PodCIDR,
		"DNSServiceIP":       DNSServiceIP,
		"KubeProxyImage":     c.cfg.Images.KubeProxy,
		"KubeRouterImage":    c.cfg.Images.KubeRouter,
		"ServiceCIDR":        ServiceCIDR,
		"CoreDNSImage":       c.cfg.Images.CoreDNS,
		"StorageClass":       StorageClass,
		"Provisioner":        provisioner,
		"GatewayDomain":      GatewayDomain,
		"GatewayAddress":     GatewayAddress,
		"DNSAddress":         DNSAddress,
		"LoadBalancerDomain": LoadBalancerDomain,
		"LoadBalancerMatch":  loadBalancerMatch,
		// CoreDNS's template, in a value so that this template leaves it alone.
		"LoadBalancerAnswer": "{{ .Name }} 60 IN A {{ index .Match 1 }}.{{ index .Match 2 }}.{{ index .Match 3 }}.{{ index .Match 4 }}",
	}
	apply := func(name string) error {
		text, err := manifests.ReadFile("manifests/" + name)
		if err != nil {
			return err
		}
		tmpl, err := template.New(name).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := tmpl.Execute(&out, data); err != nil {
			return err
		}
		if err := Apply(ctx, c.Client, out.Bytes(), ""); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	for _, name := range []string{"kube-proxy.yaml", "storage.yaml"} {
		if err := apply(name); err != nil {
			return err
		}
	}
	loops, cancel := context.WithCancel(context.Background())
	c.cancel, c.loopsDone = cancel, make(chan struct{})
	go func() {
		defer close(c.loopsDone)
		c.runLoops(loops)
	}()
	if err := c.poll(ctx, "kubelet", 3*time.Minute, c.workloadAvailable(&appsv1.DaemonSet{}, "kube-system", "kube-proxy")); err != nil {
		return fmt.Errorf("kube-proxy: %w", err)
	}
	// kube-router and CoreDNS only once kube-proxy serves the API server's
	// Service address, which its first sync of the rules writes (its pod is
	// ready as soon as it runs). kube-router rewrites the whole filter
	// table: started beside kube-proxy, it dropped the chain kube-proxy had
	// just made (KUBE-NODEPORTS) before kube-proxy's first sync jumped to
	// it, that sync failed, and kube-proxy v1.36 retries its first sync
	// only when a Service or EndpointSlice changes, which nothing did. The
	// Service stayed unserved (the host's default route answered 404) and
	// CoreDNS unready for as long as anyone waited.
	if err := c.poll(ctx, "kubelet", 3*time.Minute, c.urlReady("https://"+net.JoinHostPort(APIServiceIP, "443")+"/readyz")); err != nil {
		// An answer other than the API server's (404) is the host's
		// default route's: kube-proxy has not written the Service's rules.
		return fmt.Errorf("the kubernetes Service through kube-proxy: %w; kube-proxy's log ends with:\n%s", err, podLogTail("kube-system", "kube-proxy", "kube-proxy", 15))
	}
	if err := apply("kube-router.yaml"); err != nil {
		return err
	}
	if err := c.poll(ctx, "kubelet", 3*time.Minute, c.workloadAvailable(&appsv1.DaemonSet{}, "kube-system", "kube-router")); err != nil {
		return fmt.Errorf("kube-router: %w", err)
	}
	if err := apply("coredns.yaml"); err != nil {
		return err
	}
	if err := c.poll(ctx, "kubelet", 3*time.Minute, c.workloadAvailable(&appsv1.Deployment{}, "kube-system", "coredns")); err != nil {
		return fmt.Errorf("CoreDNS: %w; its log ends with:\n%s", err, podLogTail("kube-system", "coredns", "coredns", 15))
	}
	return nil
}

// podLogsDir is where the kubelet writes containers' output.
const podLogsDir = "/var/log/pods"

// podLogTail is the end of the newest log of container in the pods of
// namespace whose names start with prefix, for errors; what went wrong
// reading it instead.
func podLogTail(namespace, prefix, container string, n int) string {
	files, err := filepath.Glob(filepath.Join(podLogsDir, namespace+"_"+prefix+"-*", container, "*.log"))
	if err != nil || len(files) == 0 {
		return fmt.Sprintf("(no log of %s/%s* in %s: %v)", namespace, prefix, podLogsDir, err)
	}
	newest, when := "", time.Time{}
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.ModTime().After(when) {
			newest, when = f, fi.ModTime()
		}
	}
	tail, err := TailFile(newest, n)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return tail
}

// workloadAvailable checks that every pod of a DaemonSet or Deployment is
// ready.
func (c *Cluster) workloadAvailable(obj client.Object, namespace, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
			return err
		}
		var want, ready int32
		switch o := obj.(type) {
		case *appsv1.DaemonSet:
			want, ready = o.Status.DesiredNumberScheduled, o.Status.NumberReady
		case *appsv1.Deployment:
			want, ready = *o.Spec.Replicas, o.Status.ReadyReplicas
		}
		if want == 0 || ready < want {
			return fmt.Errorf("%s/%s: %d of %d pods ready (pod events and the kubelet log say why)", namespace, name, ready, want)
		}
		return nil
	}
}

// Apply server-side applies every object of a multi-document YAML stream
// under FieldOwner, in order; namespace is set on objects that name none
// (leave it empty for cluster-scoped streams). Objects whose kind the
// server does not know yet (a CRD applied just before) are retried for a
// while.
func Apply(ctx context.Context, c client.Client, yaml []byte, namespace string) error {
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(yaml), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := d.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetNamespace() == "" && namespace != "" {
			obj.SetNamespace(namespace)
		}
		if err := applyOne(ctx, c, obj); err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetKind(), client.ObjectKeyFromObject(obj), err)
		}
	}
}

func applyOne(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Patch(ctx, obj.DeepCopy(), client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership) //nolint:staticcheck // unstructured objects have no apply configuration
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Second)
	}
}
