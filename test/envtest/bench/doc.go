// Package bench measures the controller against a real API server with
// cert-manager's controllers (`make bench`): the cost of a pass over an
// unchanged control plane, the writes it makes, the first pass over a new
// one, and the controller's memory per control plane. It prints lines of the
// form "BENCH <name> <value> <unit>" and asserts nothing about speed.
package bench
