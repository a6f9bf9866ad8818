// Package probes asks tenants' networks outside the reconcile workers. A
// pass over a control plane never waits for its API server to answer: it
// reads the newest answer a Pool holds and asks for a new one when that is
// older than it wants; the Pool asks in goroutines of its own, a bounded
// number at once (each ask bounded by the prober's own timeout), and when
// an answer differs from the one before (it answers, or no longer does) or
// is the first, sends the control plane's key on a channel that the
// controller watches, so that the next pass comes at once and reads it.
//
// So when many control planes stop answering at once (a Gateway's data
// plane down, a network partition), their asks wait in the Pool, not in
// the workers, and a healthy control plane's change is reconciled as soon
// as a worker is free, not after the timeouts of those before it.
package probes
