// Command localcluster runs the quickstart: `localcluster up` builds what is
// missing, starts the local management cluster in the background, installs
// cert-manager, Cluster API and this provider, creates the sample hosted
// cluster of config/samples/quickstart.yaml (with -gateway, the one of
// config/samples/hostedcontrolplane.yaml, served through the Gateway
// capi/capi-system, whose API server name it adds to /etc/hosts) and prints
// the path of its kubeconfig; `localcluster down` tears everything down and
// removes those /etc/hosts lines. `localcluster serve` is the background
// process that runs the cluster.
package main
