// Package provider installs what a management cluster needs to run hosted
// control planes, the way users install it: cert-manager, Cluster API's core
// provider (its release manifests rendered from the module, with ClusterTopology
// and RuntimeSDK on) with the local cluster's infrastructure kind LocalCluster
// beside it, and this project's control-plane-components.yaml.
package provider
