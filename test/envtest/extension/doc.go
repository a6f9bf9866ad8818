// Package extension runs cmd/extension end to end, as an operator deploys
// it: registered through a real ExtensionConfig with the real Cluster API
// core manager (built from source by `make capi-manager`), on the real test
// API server of test/envtest, in front of a real three-member etcd cluster
// started from the kube binaries with certificates the tests issue. Its
// tests check what a user would see: the variables a ClusterClass lists,
// the HostedControlPlane a topology gets, upgrades held and released. On
// the same real etcd it also proves the controller's etcd membership changes
// (TestMembershipChangesInPlace). Its benchmarks measure the hooks' latency
// (`make bench`).
//
// The same kind of etcd cluster is backed up by the controller's backup
// controller (internal/backup, run in the test process) into a real S3
// server, versitygw built from source by `make versitygw` (VERSITYGW names
// the binary), reached through a TCP relay that can kill the server in the
// middle of an upload.
package extension
