package etcd

import (
	"github.com/blang/semver/v4"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
)

// versions are kubeadm's etcd tags (cmd/kubeadm/app/constants), one for each
// supported minor.
var versions = render.MinorTags{
	{Minor: 31, Tag: "3.5.15-0"},
	{Minor: 32, Tag: "3.5.16-0"},
	{Minor: 33, Tag: "3.5.21-0"},
	{Minor: 34, Tag: "3.6.8-0"},
	{Minor: 35, Tag: "3.6.8-0"},
	{Minor: 36, Tag: "3.6.8-0"},
}

// Tag is the etcd image tag for a Kubernetes version.
func Tag(v semver.Version) string { return versions.For(v) }
