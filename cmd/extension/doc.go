// Command extension is the hosted control plane's Cluster API Runtime SDK
// extension server, registered with an ExtensionConfig. Over TLS it serves
// discovery, the topology mutation hooks of internal/topology (variables,
// patches, validation) and the lifecycle hooks of internal/hooks (upgrade
// gates on etcd and control plane health). Run it with --help for its
// settings.
package main
