// Package webhooks admits HostedControlPlanes and HostedControlPlaneTemplates:
// it defaults what the CRD schema cannot (the "v" of a version), rejects bad
// input with messages that name the field and say what is allowed, and warns
// about args that weaken a component's security. The checks are exported so
// the Runtime SDK extension can reuse them when it validates a topology.
package webhooks
