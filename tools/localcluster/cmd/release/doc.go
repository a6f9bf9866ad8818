// Command release writes a release of the provider into a clusterctl
// repository directory (`make release VERSION=v0.2.0`):
// <out>/control-plane-hosted-control-plane/<version>/ gets
// control-plane-components.yaml (config/release, its images pinned by
// digest), metadata.yaml, and images/<name>.tar, the OCI archive of each
// image of the release.
package main
