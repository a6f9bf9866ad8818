// Command controller is the hosted control plane controller: it serves the
// admission webhooks for HostedControlPlanes and their templates and owns
// every object of each hosted control plane. Run it with --help for its
// settings; each flag can also be set by its environment variable.
package main
