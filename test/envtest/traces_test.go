package envtest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// The controller's traces, as a collector receives them over OTLP/gRPC from
// the controller binary, with the endpoint, sampler and batch delay set by
// the standard OpenTelemetry variables (the traces endpoint wins over an
// endpoint of none): every pass over a control plane is a root span with
// the control plane's namespace and names, each phase a child span that
// owns the management cluster's REST requests it made; the observation
// that begins a pass that asked etcd (outside the workers, see package
// probes) has an etcd health check whose gRPC calls to the member are its
// children, the probe of a pass that asked the API server its HTTP
// request, and a pass that keeps the workload cluster a workload sync span
// whose phases own the workload requests. No span carries a value of the
// control plane's Secrets.
func TestTraces(t *testing.T) {
	serial(t)
	receiver, err := StartOTLPReceiver()
	require.NoError(t, err)
	t.Cleanup(receiver.Stop)
	withControllerSettings(t, "OTEL_EXPORTER_OTLP_ENDPOINT=none", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="+receiver.Endpoint,
		"OTEL_TRACES_SAMPLER=always_on", "OTEL_BSP_SCHEDULE_DELAY=100")

	const name = "traces"
	cluster, hcp := servingControlPlane(t, name)
	ns := hcp.Namespace
	setStatus(t, cluster, func(c *clusterv1.Cluster) { c.Status.Initialization.InfrastructureProvisioned = ptr.To(true) })
	waitCondition(t, hcp, v1alpha1.CoreDNSReadyCondition, metav1.ConditionTrue, v1alpha1.NoNodesReason)

	cp := client.ObjectKeyFromObject(hcp)
	var tr traces
	var creation, workload, checked, probed Span
	waitFor(t, "a pass that created objects, one that kept the workload cluster and ones that asked etcd and the API server", func() error {
		tr = newTraces(receiver.Spans(), "hosted-control-plane-controller")
		var ok bool
		if creation, ok = tr.firstPass(cp, func(pass Span) bool {
			return slices.ContainsFunc(tr.children(pass, "phase "+v1alpha1.CertificatesReadyCondition), func(p Span) bool {
				return len(tr.children(p, "HTTP PATCH")) > 0
			})
		}); !ok {
			return fmt.Errorf("no pass applied the certificates among %d spans", len(tr.spans))
		}
		if workload, ok = tr.firstPass(cp, func(pass Span) bool {
			for _, sync := range tr.children(pass, "workload sync") {
				for _, p := range tr.children(sync, "phase "+v1alpha1.CoreDNSReadyCondition) {
					if len(tr.children(p, "workload APPLY")) > 0 {
						return true
					}
				}
			}
			return false
		}); !ok {
			return fmt.Errorf("no pass applied CoreDNS in the workload cluster among %d spans", len(tr.spans))
		}
		// A pass asks etcd and the API server only when the answer it
		// reads is older than a second; the asks run outside the workers,
		// below the step of the pass that asked.
		if checked, ok = tr.firstPass(cp, func(pass Span) bool {
			for _, o := range tr.children(pass, "observe") {
				for _, c := range tr.children(o, "etcd health check") {
					if len(tr.children(c, "etcdserverpb.Maintenance/Status")) > 0 {
						return true
					}
				}
			}
			return false
		}); !ok {
			return fmt.Errorf("no pass asked etcd among %d spans", len(tr.spans))
		}
		if probed, ok = tr.firstPass(cp, func(pass Span) bool {
			for _, p := range tr.children(pass, "probe") {
				if len(tr.children(p, "HTTP GET")) > 0 {
					return true
				}
			}
			return false
		}); !ok {
			return fmt.Errorf("no pass asked the API server among %d spans", len(tr.spans))
		}
		return nil
	})
	t.Logf("the pass that created objects:\n%s\nthe pass that kept the workload cluster:\n%s", tr.tree(creation), tr.tree(workload))
	t.Logf("a pass that asked etcd:\n%s\na pass that asked the API server:\n%s", tr.tree(checked), tr.tree(probed))

	for _, pass := range []Span{creation, workload} {
		assert.Empty(t, pass.ParentID, "a pass is a root span")
		assert.Equal(t, map[string]string{"k8s.namespace.name": ns, "hostedcp.control_plane": name, "hostedcp.cluster": cluster.Name},
			pick(pass.Attributes, "k8s.namespace.name", "hostedcp.control_plane", "hostedcp.cluster"))
		phases := tr.children(pass, "phase ")
		require.NotEmpty(t, phases)
		assert.Equal(t, "phase "+v1alpha1.ClusterReadyCondition, phases[0].Name, "the first phase")
		for _, p := range phases {
			assert.Equal(t, "management", p.Attributes["hostedcp.side"], p.Name)
		}
		// The status is written by the pass itself, after its phases.
		patches := tr.children(pass, "HTTP PATCH")
		require.NotEmpty(t, patches, "the status patch")
		assert.Contains(t, patches[len(patches)-1].Attributes["url.full"], "/namespaces/"+ns+"/hostedcontrolplanes/"+name+"/status")
	}
	for _, p := range tr.children(tr.children(creation, "phase "+v1alpha1.CertificatesReadyCondition)[0], "HTTP ") {
		assert.Contains(t, p.Attributes["url.full"], "/namespaces/"+ns+"/", "a REST request of the certificates' phase")
	}

	// The pass that kept the workload cluster went through every management
	// phase, observed etcd and read the API server's answer first.
	var names []string
	for _, p := range tr.children(workload, "phase ") {
		names = append(names, strings.TrimPrefix(p.Name, "phase "))
	}
	assert.Equal(t, []string{
		v1alpha1.ClusterReadyCondition, v1alpha1.ExposureReadyCondition, v1alpha1.CertificatesReadyCondition, v1alpha1.KubeconfigReadyCondition,
		v1alpha1.EtcdReadyCondition, v1alpha1.APIServerReadyCondition, v1alpha1.ControllersReadyCondition,
	}, names)
	assert.Len(t, tr.children(workload, "observe"), 1)
	assert.Len(t, tr.children(workload, "probe"), 1)
	checks := tr.children(tr.children(checked, "observe")[0], "etcd health check")
	require.Len(t, checks, 1, "one ask of etcd per pass at most")
	assert.Equal(t, ns, checks[0].Attributes["k8s.namespace.name"])
	assert.Equal(t, cluster.Name, checks[0].Attributes["hostedcp.cluster"])
	assert.NotEmpty(t, tr.children(checks[0], "etcdserverpb.Cluster/MemberList"), "etcd's members asked over gRPC")
	get := tr.children(tr.children(probed, "probe")[0], "HTTP GET")
	require.Len(t, get, 1, "the probe's request")
	assert.Contains(t, get[0].Attributes["url.full"], "/readyz")
	sync := tr.children(workload, "workload sync")[0]
	coreDNS := tr.children(sync, "phase "+v1alpha1.CoreDNSReadyCondition)[0]
	assert.Equal(t, "workload", coreDNS.Attributes["hostedcp.side"])
	var applied []string
	for _, a := range tr.children(coreDNS, "workload APPLY") {
		applied = append(applied, a.Attributes["k8s.kind"]+" "+a.Attributes["k8s.object.namespace"]+"/"+a.Attributes["k8s.object.name"])
	}
	assert.Contains(t, applied, "Deployment kube-system/coredns")

	// What a tracing backend stores says nothing a Secret holds.
	secrets := &corev1.SecretList{}
	require.NoError(t, env.Client.List(testContext(t), secrets, client.InNamespace(ns)))
	for _, s := range tr.spans {
		for key, v := range s.Attributes {
			for _, secret := range secrets.Items {
				for k, data := range secret.Data {
					if len(data) >= 8 && strings.Contains(v, string(data)) {
						t.Errorf("span %q attribute %s carries Secret %s key %s", s.Name, key, secret.Name, k)
					}
				}
			}
		}
	}
}

// traces are the spans of one service, by id.
type traces struct {
	spans []Span
	byID  map[string]Span
}

func newTraces(all []Span, service string) traces {
	tr := traces{byID: map[string]Span{}}
	for _, s := range all {
		if s.Service == service {
			tr.spans = append(tr.spans, s)
			tr.byID[s.TraceID+s.SpanID] = s
		}
	}
	sort.Slice(tr.spans, func(i, j int) bool { return tr.spans[i].StartNano < tr.spans[j].StartNano })
	return tr
}

// children are the spans whose parent is s, in the order they started,
// whose names begin with prefix; a child of another trace never counts.
func (tr traces) children(s Span, prefix string) []Span {
	var out []Span
	for _, c := range tr.spans {
		if c.TraceID == s.TraceID && c.ParentID == s.SpanID && strings.HasPrefix(c.Name, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// firstPass is the first pass over the control plane cp for which ok.
func (tr traces) firstPass(cp client.ObjectKey, ok func(Span) bool) (Span, bool) {
	for _, s := range tr.spans {
		if s.Name == "reconcile" && s.Attributes["k8s.namespace.name"] == cp.Namespace && s.Attributes["hostedcp.control_plane"] == cp.Name && ok(s) {
			return s, true
		}
	}
	return Span{}, false
}

// tree prints s and its descendants, indented.
func (tr traces) tree(s Span) string {
	var b strings.Builder
	var walk func(Span, int)
	walk = func(s Span, depth int) {
		fmt.Fprintf(&b, "%s%s %v\n", strings.Repeat("  ", depth), s.Name, pick(s.Attributes, "hostedcp.reason", "url.full", "k8s.kind", "k8s.object.name"))
		for _, c := range tr.children(s, "") {
			walk(c, depth+1)
		}
	}
	walk(s, 0)
	return b.String()
}

// pick are the attributes of keys that are there.
func pick(attrs map[string]string, keys ...string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		if v, ok := attrs[k]; ok {
			out[k] = v
		}
	}
	return out
}
