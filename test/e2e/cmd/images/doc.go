// Command images builds every binary and container image the local
// management cluster and the end-to-end tests need that is missing under
// bin/ (see package test/e2e/images), then prints each image's reference
// and tarball. `make images` runs it from the repository root.
package main
