package contract

import (
	"fmt"
	"strings"

	"github.com/distribution/reference"
)

// DefaultRegistry is where the images of the Kubernetes components come
// from unless a control plane overrides them.
const DefaultRegistry = "registry.k8s.io"

// Registries are the registries the platform allows images from
// (ALLOWED_IMAGE_REGISTRIES), which admission enforces and the controller
// reports on. Each is a registry host with an optional port and path
// prefix; none means any registry.
type Registries []registry

// registry is one allowed registry: a host[:port] and a path prefix, both
// as a container runtime reads an image reference.
type registry struct{ domain, path string }

// ParseRegistries reads a comma-separated list such as
// "registry.k8s.io,registry.example.com:5000/mirror"; an empty list, or
// AnyRegistry, allows any registry.
func ParseRegistries(list string) (Registries, error) {
	if strings.TrimSpace(list) == AnyRegistry {
		return nil, nil
	}
	var out Registries
	for entry := range strings.SplitSeq(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		r, err := parseRegistry(entry)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// AnyRegistry alone allows every registry, as an empty list does, for
// installers such as clusterctl that take no empty value.
const AnyRegistry = "*"

// probeRepository completes an allowed registry into an image name, to read
// it by the grammar of image references. It has two components, so that
// Docker Hub's "library/" is not put in front of it.
const probeRepository = "probe/image"

func parseRegistry(entry string) (registry, error) {
	named, err := reference.ParseNormalizedNamed(entry + "/" + probeRepository)
	host, _, _ := strings.Cut(entry, "/")
	// A first part without a dot or port is a path of Docker Hub to a
	// container runtime ("team/app" is docker.io/team/app), never a host.
	if err != nil || !strings.EqualFold(reference.Domain(named), host) {
		return registry{}, fmt.Errorf("%q: use a registry host with an optional port and path, such as registry.k8s.io, "+
			"registry.example.com:5000 or registry.example.com/mirror, without a scheme, tag or trailing \"/\"", entry)
	}
	return registry{
		domain: strings.ToLower(reference.Domain(named)),
		path:   strings.TrimSuffix(strings.TrimSuffix(reference.Path(named), probeRepository), "/"),
	}, nil
}

// Allows tells whether the image name (as a pod would carry it: registry,
// repository, optional tag) comes from an allowed registry: its host and
// port are one's exactly, and its repository lies within that one's path,
// component by component. Any image is allowed when there are none.
func (rs Registries) Allows(image string) bool {
	if len(rs) == 0 {
		return true
	}
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return false
	}
	domain, path := strings.ToLower(reference.Domain(named)), reference.Path(named)
	for _, r := range rs {
		if domain == r.domain && (r.path == "" || path == r.path || strings.HasPrefix(path, r.path+"/")) {
			return true
		}
	}
	return false
}

// String lists the registries as they are configured, or "any" when none
// are.
func (rs Registries) String() string {
	if len(rs) == 0 {
		return "any"
	}
	names := make([]string, 0, len(rs))
	for _, r := range rs {
		names = append(names, r.String())
	}
	return strings.Join(names, ", ")
}

func (r registry) String() string {
	if r.path == "" {
		return r.domain
	}
	return r.domain + "/" + r.path
}

// Repositories of the default images in DefaultRegistry, by component.
// An override of a tag alone pulls from one of them, so admission checks
// it against the allowed registries as the renderer will join it.
const (
	APIServerRepository          = "kube-apiserver"
	KonnectivityServerRepository = "kas-network-proxy/proxy-server"
	ControllerManagerRepository  = ControllerManagerComponent
	SchedulerRepository          = SchedulerComponent
	EtcdRepository               = "etcd"
	KonnectivityAgentRepository  = "kas-network-proxy/proxy-agent"
	CoreDNSRepository            = "coredns/coredns"
	KubeProxyRepository          = "kube-proxy"
)
