// Package webhooks admits HostedControlPlanes and HostedControlPlaneTemplates:
// it defaults what the CRD schema cannot (the "v" of a version), rejects bad
// input with messages that name the field and say what is allowed (images
// from registries the platform does not allow among it), and warns about
// args that weaken a component's security. The checks are exported so the
// Runtime SDK extension can reuse them when it validates a topology, and the
// controller when it reports whether a control plane's images are allowed.
package webhooks
