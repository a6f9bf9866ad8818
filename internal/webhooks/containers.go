package webhooks

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Bounds of args beside the schema's count (at most 64 per container).
const (
	// MaxArgNameLength is the longest flag name args may carry.
	MaxArgNameLength = 128
	// MaxArgValueLength is the longest flag value args may carry: room for
	// long lists such as feature gates or cipher suites.
	MaxArgValueLength = 4096
)

// container is the spec of one container and what the controller owns of
// it: every container a user tunes appears once, in containers.
type container struct {
	path  *field.Path
	spec  *v1alpha1.Container
	owned contract.OwnedFlags
	weak  []weakening
	// repository is that of its default image, in contract.DefaultRegistry.
	repository string
}

func containers(path *field.Path, s *v1alpha1.ControlPlaneSettings) []container {
	deployment := path.Child("deployment")
	return []container{
		{deployment.Child("apiServer"), &s.Deployment.APIServer.Container, contract.APIServerOwnedFlags, apiServerWeakenings, contract.APIServerRepository},
		{
			deployment.Child("apiServer", "konnectivity"), &s.Deployment.APIServer.Konnectivity, contract.KonnectivityServerOwnedFlags, nil,
			contract.KonnectivityServerRepository,
		},
		{
			deployment.Child("controllerManager"), &s.Deployment.ControllerManager.Container, contract.ControllerManagerOwnedFlags, controllerManagerWeakenings,
			contract.ControllerManagerRepository,
		},
		{deployment.Child("scheduler"), &s.Deployment.Scheduler.Container, contract.SchedulerOwnedFlags, schedulerWeakenings, contract.SchedulerRepository},
		{path.Child("etcd"), &s.Etcd.Container, contract.EtcdOwnedFlags, nil, contract.EtcdRepository},
		{path.Child("konnectivityClient"), &s.KonnectivityClient.Container, contract.KonnectivityAgentOwnedFlags, nil, contract.KonnectivityAgentRepository},
		{path.Child("coredns"), &s.CoreDNS.Container, contract.CoreDNSOwnedFlags, nil, contract.CoreDNSRepository},
		{path.Child("kubeProxy"), &s.KubeProxy.Container, contract.KubeProxyOwnedFlags, nil, contract.KubeProxyRepository},
	}
}

func (c container) validate() field.ErrorList {
	errs := validateImage(c.path.Child("image"), c.spec.Image)
	errs = append(errs, validateResources(c.path.Child("resources"), c.spec.Resources)...)
	return append(errs, validateArgs(c.path.Child("args"), c.spec.Args, c.owned)...)
}

func validateArgs(path *field.Path, args map[string]string, owned contract.OwnedFlags) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(args)) {
		switch {
		case name == "" || strings.HasPrefix(name, "-") || strings.ContainsAny(name, "= \t\n"):
			errs = append(errs, field.Invalid(path.Key(name), name,
				`must be a flag name without leading dashes, spaces or "=" (for example "v" for --v)`))
		case len(name) > MaxArgNameLength:
			errs = append(errs, field.TooLong(path.Key(name[:32]+"..."), name, MaxArgNameLength))
		default:
			if why, ok := owned.Why(name); ok {
				errs = append(errs, field.Forbidden(path.Key(name), fmt.Sprintf("set by the controller (%s); remove it", why)))
			}
		}
		if len(args[name]) > MaxArgValueLength {
			errs = append(errs, field.TooLong(path.Key(name), args[name], MaxArgValueLength))
		}
	}
	return errs
}

// Parts of a reference that stand in for those not being checked.
const (
	probeRegistry   = "registry.example.com"
	probeRepository = "image"
)

// validateImage checks each part of an image override on its own, by the
// grammar of image references: the renderer joins them with the defaults
// into registry/repository:tag.
func validateImage(path *field.Path, img *v1alpha1.ImageSpec) field.ErrorList {
	if img == nil {
		return nil
	}
	var errs field.ErrorList
	if r := img.Registry; r != nil && !isRegistry(*r) {
		errs = append(errs, field.Invalid(path.Child("registry"), *r,
			`must be a registry host with an optional port and path, such as registry.example.com, registry.example.com:5000 or registry.example.com/mirror, without a scheme or a trailing "/"`))
	}
	if r := img.Repository; r != nil && !isRepository(*r) {
		errs = append(errs, field.Invalid(path.Child("repository"), *r,
			`must be a repository path: "/"-separated components of lowercase letters and digits joined by ".", "_", "__" or "-", such as kube-apiserver or kas-network-proxy/proxy-server`))
	}
	if t := img.Tag; t != nil && !isTag(*t) {
		errs = append(errs, field.Invalid(path.Child("tag"), *t,
			`must be an image tag: up to 128 letters, digits, "_", "." and "-", not starting with "." or "-", such as v1.36.3`))
	}
	return errs
}

// isRegistry reports whether s is a host[:port] with an optional path, the
// start of an image name.
func isRegistry(s string) bool {
	named, err := reference.WithName(s + "/" + probeRepository)
	return err == nil && reference.Domain(named) == strings.Split(s, "/")[0]
}

// isRepository reports whether s is the path of an image name.
func isRepository(s string) bool {
	named, err := reference.WithName(probeRegistry + "/" + s)
	return err == nil && reference.Domain(named) == probeRegistry && reference.Path(named) == s
}

// isTag reports whether s is an image tag.
func isTag(s string) bool {
	named, err := reference.WithName(probeRegistry + "/" + probeRepository)
	if err != nil {
		return false
	}
	_, err = reference.WithTag(named, s)
	return err == nil
}

// DisallowedImages are the image overrides of s that pull from a registry
// the platform does not allow. An override of any part counts: the parts
// it leaves unset are the default image's, so a repository or tag alone
// pulls from contract.DefaultRegistry, which is then checked too. Images
// nothing overrides are the controller's defaults, which the platform
// chose by installing it, and are not checked. The message names the
// image without its tag, so a new version of the control plane, which
// changes the default tag, refuses nothing that was accepted before.
func DisallowedImages(path *field.Path, s *v1alpha1.ControlPlaneSettings, allowed contract.Registries) field.ErrorList {
	if len(allowed) == 0 {
		return nil
	}
	var errs field.ErrorList
	for _, c := range containers(path, s) {
		img := c.spec.Image
		if img == nil || (img.Registry == nil && img.Repository == nil && img.Tag == nil) {
			continue
		}
		registry, from := ptr.Deref(img.Registry, contract.DefaultRegistry), ""
		if img.Registry == nil {
			from = " (image.registry is unset: the default registry)"
		}
		name := registry + "/" + ptr.Deref(img.Repository, c.repository)
		if !isRegistry(registry) || (img.Repository != nil && !isRepository(*img.Repository)) {
			continue // refused as malformed by validateImage
		}
		if !allowed.Allows(name) {
			errs = append(errs, field.Forbidden(c.path.Child("image"), fmt.Sprintf(
				"pulls %s%s, which is not from a registry this platform allows (%s); use an image from one of them",
				name, from, allowed)))
		}
	}
	if audit := s.Deployment.APIServer.Audit; audit != nil && audit.Webhook != nil && audit.Webhook.Image != nil {
		img := audit.Webhook.Image
		name := ptr.Deref(img.Registry, "") + "/" + ptr.Deref(img.Repository, "")
		if img.Registry != nil && img.Repository != nil && isRegistry(*img.Registry) && isRepository(*img.Repository) && !allowed.Allows(name) {
			errs = append(errs, field.Forbidden(path.Child("deployment", "apiServer", "audit", "webhook", "image"), fmt.Sprintf(
				"pulls %s, which is not from a registry this platform allows (%s); use an image from one of them", name, allowed)))
		}
	}
	return errs
}

// weakening is an args value that weakens a component's security. The
// controller never sets one; admission allows it with a warning, since the
// user may mean it (a throwaway cluster, a debugging session).
type weakening struct {
	flag    string
	weakens func(value string) bool
	why     string
}

var (
	apiServerWeakenings = []weakening{
		{"authorization-mode", listHas("AlwaysAllow"), "AlwaysAllow lets every authenticated client do anything; the controller sets Node,RBAC"},
		{"enable-admission-plugins", not(listHas("NodeRestriction")), "without NodeRestriction, which the controller enables, a kubelet may modify other nodes and their pods"},
		{"disable-admission-plugins", listHas("NodeRestriction"), "without NodeRestriction, which the controller enables, a kubelet may modify other nodes and their pods"},
		{"profiling", isTrue, profilingWeakens},
	}
	controllerManagerWeakenings = []weakening{
		{"use-service-account-credentials", not(isTrue), "every controller then acts with the controller manager's own broad permissions instead of its own service account"},
		{"profiling", isTrue, profilingWeakens},
	}
	schedulerWeakenings = []weakening{{"profiling", isTrue, profilingWeakens}}
)

const profilingWeakens = "it serves profiling data, which the controller turns off"

func listHas(item string) func(string) bool {
	return func(value string) bool { return slices.Contains(strings.Split(value, ","), item) }
}

func not(f func(string) bool) func(string) bool { return func(v string) bool { return !f(v) } }

func isTrue(value string) bool {
	b, err := strconv.ParseBool(value)
	return err == nil && b
}

func (c container) warnings() []string {
	var warnings []string
	for _, name := range slices.Sorted(maps.Keys(c.spec.Args)) {
		value := c.spec.Args[name]
		for _, w := range c.weak {
			if strings.ReplaceAll(name, "_", "-") == w.flag && w.weakens(value) {
				warnings = append(warnings, fmt.Sprintf("%s: %q weakens security: %s", c.path.Child("args").Key(name), value, w.why))
			}
		}
	}
	return warnings
}
