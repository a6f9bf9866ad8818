// Package topology holds the Runtime SDK topology mutation hooks of
// cmd/extension: the ClusterClass variables it publishes, the patches that
// apply them to HostedControlPlaneTemplates and infrastructure cluster
// templates, and the validation of a Cluster's topology.
package topology
