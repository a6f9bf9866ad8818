// Package local puts the pieces of the end-to-end environment together for
// the tests and the quickstart: the images built from source, the local
// management cluster running them, and the provider installed into it.
package local
