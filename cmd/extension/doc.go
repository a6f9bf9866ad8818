// Command extension is the hosted control plane's Cluster API Runtime SDK
// extension server, registered with an ExtensionConfig. It serves discovery
// over TLS; lifecycle and topology mutation hooks register with it. Run it
// with --help for its settings.
package main
