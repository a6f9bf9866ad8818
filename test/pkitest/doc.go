// Package pkitest issues certificates for tests and the local management
// cluster: a self-signed CA (NewCA) and leaves it signs for clients and
// servers (KeyPair.Issue), PEM encoded or written as <name>.crt and
// <name>.key as kubeadm lays them out; and leaves of a cluster's own CA,
// parsed from its Secret (Parse). Keys it makes are ECDSA P-256 and
// certificates last 30 days, longer than any test run or a quickstart left
// running for a while.
package pkitest
