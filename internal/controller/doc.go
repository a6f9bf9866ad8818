// Package controller reconciles HostedControlPlanes. Each pass runs an
// ordered list of phases (cluster, exposure, certificates, kubeconfig, etcd,
// API server, controllers, availability); each phase owns one condition whose
// reason and message say what is missing, and a phase that is not done stops
// the pass, so an upgrade moves etcd, then the API servers, then the
// controllers, never two at once. Status is computed in one place from what
// is observed, and an unchanged control plane costs no API writes. Once the
// API server answers, the add-ons in the workload cluster are kept through
// Cluster API's ClusterCache, each under a condition of its own that never
// makes the control plane unavailable.
package controller
