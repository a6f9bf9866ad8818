// Package probes asks tenants' networks outside the reconcile workers. A
// pass over a control plane never waits for its API server or its etcd to
// answer: it reads the newest answer a Pool holds and asks for a new one
// when that is older than it wants; the Pool asks in goroutines of its own,
// a bounded number at once (each ask bounded by the asker's own timeouts),
// and when an answer is news (the first, or one that differs from the one
// before in what the caller says matters), sends the control plane's key on
// a channel that the controller watches, so that the next pass comes at
// once and reads it. An answer that something done since may have changed
// (a membership change of etcd) is outdated, and asked again.
//
// So when many control planes stop answering at once (a Gateway's data
// plane down, a network partition), their asks wait in the Pool, not in
// the workers, and a healthy control plane's change is reconciled as soon
// as a worker is free, not after the timeouts of those before it.
package probes
