// Command localcluster runs the quickstart: `localcluster up` builds what is
// missing, starts the local management cluster in the background, installs
// cert-manager, Cluster API and this provider, creates the sample hosted
// cluster of config/samples/quickstart.yaml and prints the path of its
// kubeconfig; `localcluster down` tears everything down. `localcluster serve`
// is the background process that runs the cluster.
package main
