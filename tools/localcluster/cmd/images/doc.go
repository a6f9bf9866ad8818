// Command images builds every binary and container image the local
// management cluster and the end-to-end tests need that is missing under the
// repository's bin/ (see package tools/localcluster/images), then prints each
// image's reference and tarball. `make images` runs it; with -conformance
// it builds the Kubernetes conformance suite and its test images instead
// (`make conformance-images`).
package main
