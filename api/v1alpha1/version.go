package v1alpha1

import (
	"fmt"
	"strings"

	"github.com/blang/semver/v4"
)

// The Kubernetes versions this release can run: every patch and
// pre-release of the minor versions from MinKubernetesMinor to
// MaxKubernetesMinor of KubernetesMajor. Below v1.31 the workers' kubeadm
// reads an older configuration API than the v1beta4 the controller writes;
// above v1.36 the controller knows no etcd, CoreDNS or konnectivity images.
// The renderer's image tables cover exactly this range (a test checks it).
const (
	KubernetesMajor    = 1
	MinKubernetesMinor = 31
	MaxKubernetesMinor = 36
)

// ParseVersion parses a spec.version such as v1.36.3 as a semantic version;
// the leading "v" is required.
func ParseVersion(version string) (semver.Version, error) {
	if !strings.HasPrefix(version, "v") {
		return semver.Version{}, fmt.Errorf("%q does not start with v", version)
	}
	return semver.Parse(strings.TrimPrefix(version, "v"))
}

// IsSupportedVersion reports whether this release can run Kubernetes v.
func IsSupportedVersion(v semver.Version) bool {
	return v.Major == KubernetesMajor && v.Minor >= MinKubernetesMinor && v.Minor <= MaxKubernetesMinor
}

// SupportedVersions describes the supported range for messages, as
// "v1.31.x to v1.36.x".
func SupportedVersions() string {
	return fmt.Sprintf("v%d.%d.x to v%d.%d.x", KubernetesMajor, MinKubernetesMinor, KubernetesMajor, MaxKubernetesMinor)
}
