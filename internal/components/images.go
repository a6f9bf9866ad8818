package components

import (
	"fmt"

	"github.com/blang/semver/v4"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// minorTags maps Kubernetes minor versions to the image tag kubeadm ships
// with them; minors outside the table use the nearest one.
type minorTags []struct {
	minor uint64
	tag   string
}

func (t minorTags) tag(v semver.Version) string {
	tag := t[0].tag
	for _, e := range t {
		if v.Minor >= e.minor {
			tag = e.tag
		}
	}
	return tag
}

// etcdVersions are kubeadm's etcd tags (cmd/kubeadm/app/constants).
var etcdVersions = minorTags{
	{31, "3.5.15-0"},
	{32, "3.5.16-0"},
	{33, "3.5.21-0"},
	{34, "3.6.8-0"},
	{35, "3.6.8-0"},
	{36, "3.6.8-0"},
}

// coreDNSVersions are kubeadm's CoreDNS tags (CoreDNSVersion in
// cmd/kubeadm/app/constants).
var coreDNSVersions = minorTags{
	{31, "v1.11.3"},
	{33, "v1.12.0"},
	{34, "v1.12.1"},
	{35, "v1.13.1"},
	{36, "v1.14.2"},
}

// EtcdTag is the etcd image tag for a Kubernetes version.
func EtcdTag(v semver.Version) string { return etcdVersions.tag(v) }

// CoreDNSTag is the CoreDNS image tag for a Kubernetes version.
func CoreDNSTag(v semver.Version) string { return coreDNSVersions.tag(v) }

// KonnectivityTag is the konnectivity image tag released with a Kubernetes
// minor version (v0.<minor>.0).
func KonnectivityTag(v semver.Version) string { return fmt.Sprintf("v0.%d.0", v.Minor) }

// image is registry/repository:tag with the overrides of spec applied.
func image(def v1alpha1.ImageSpec, override *v1alpha1.ImageSpec) string {
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

// defaultImage is the image of repository at tag in the configured registry.
func (in *Input) defaultImage(repository, tag string) v1alpha1.ImageSpec {
	return v1alpha1.ImageSpec{Registry: &in.Settings.Registry, Repository: &repository, Tag: &tag}
}
