package v1alpha1

import (
	"fmt"
	"strings"

	"github.com/blang/semver/v4"
)

// ParseVersion parses a spec.version such as v1.36.3 as a semantic version;
// the leading "v" is required.
func ParseVersion(version string) (semver.Version, error) {
	if !strings.HasPrefix(version, "v") {
		return semver.Version{}, fmt.Errorf("%q does not start with v", version)
	}
	return semver.Parse(strings.TrimPrefix(version, "v"))
}
