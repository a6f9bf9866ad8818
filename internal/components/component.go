package components

import (
	"context"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/readiness"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
)

// Component is one part of a hosted control plane, in the spirit of
// Gardener's component Deployer: it owns its objects, the certificates it
// uses, the rule by which it is ready and the condition that says so.
// Rendering reads nothing but the Input; only Ready reads a cluster.
type Component interface {
	// Name names the component; its golden file is
	// testdata/<case>/<name>.yaml.
	Name() string
	// Condition is the HostedControlPlane condition that reports it.
	// Neighbouring components that share a condition form one phase of a
	// pass, done when each of them is.
	Condition() string
	// Render returns the objects the component keeps, from in alone.
	Render(in render.Input) ([]client.Object, error)
	// Ready reads, through c, what became of the objects applied in this
	// pass and says how far the component is.
	Ready(ctx context.Context, c client.Reader, in render.Input, applied readiness.Applied) (readiness.Outcome, error)
}

// Guarded is a component with a preflight check, as Cluster API's kubeadm
// control plane has before scaling: what must hold before its objects may
// change. A preflight that is not done holds the component as it runs.
type Guarded interface {
	Preflight(ctx context.Context, c client.Reader, in render.Input) (readiness.Outcome, error)
}

// Pruned is a component that renders objects of some kinds only sometimes
// (a disruption budget needs more than one replica): those of the kinds, of
// its component label and owned by the control plane, that it no longer
// renders are deleted.
type Pruned interface {
	Prunes() (component string, kinds []client.ObjectList)
}

// Optional is a component the spec can turn off: its objects are then
// removed rather than kept.
type Optional interface {
	Disabled(in render.Input) bool
}

// Management are the components in the management cluster, in the order a
// pass keeps them: each needs the ones before it done, so that an upgrade
// rolls etcd, then the API servers, then the controllers. members is the
// etcd component, with the clients that change running etcds (the zero
// value renders alone).
func Management(members etcd.Component) []Component {
	return []Component{
		Exposure{},
		PKI{},
		Configs{},
		ClusterKubeconfig{},
		members,
		APIServer{},
		ControllerManager{},
		Scheduler{},
	}
}

// Workload are the components in the workload cluster, kept once its API
// server answers; each stands alone.
func Workload() []Component {
	return []Component{Join{}, KubernetesService{}, CoreDNS{}, KubeProxy{}, KonnectivityAgent{}}
}

// EtcdTag is etcd.Tag, for the tools that build the images control planes
// run by default (tools/localcluster/images).
func EtcdTag(v semver.Version) string { return etcd.Tag(v) }
