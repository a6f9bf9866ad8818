package render

import (
	"github.com/blang/semver/v4"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// MinorTags maps Kubernetes minor versions to the image tag kubeadm ships
// with them; minors outside the table use the nearest one.
type MinorTags []struct {
	Minor uint64
	Tag   string
}

// For is the tag for a Kubernetes version.
func (t MinorTags) For(v semver.Version) string {
	tag := t[0].Tag
	for _, e := range t {
		if v.Minor >= e.Minor {
			tag = e.Tag
		}
	}
	return tag
}

// Image is registry/repository:tag with the overrides of spec applied.
func Image(def v1alpha1.ImageSpec, override *v1alpha1.ImageSpec) string {
	if override != nil {
		if override.Registry != nil {
			def.Registry = override.Registry
		}
		if override.Repository != nil {
			def.Repository = override.Repository
		}
		if override.Tag != nil {
			def.Tag = override.Tag
		}
	}
	return ptr.Deref(def.Registry, "") + "/" + ptr.Deref(def.Repository, "") + ":" + ptr.Deref(def.Tag, "")
}

// DefaultImage is the image of repository at tag in the configured registry.
func (in Input) DefaultImage(repository, tag string) v1alpha1.ImageSpec {
	return v1alpha1.ImageSpec{Registry: &in.Settings.Registry, Repository: &repository, Tag: &tag}
}
