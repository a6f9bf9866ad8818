// Package encryption is encryption at rest of a workload cluster's Secrets:
// the EncryptionConfiguration (apiserver.config.k8s.io/v1) its API servers
// read, generated once per cluster, and the rewrite that brings Secrets
// stored before it took over under its key.
//
// The provider is secretbox (XSalsa20 and Poly1305): authenticated, with a
// 32-byte key and a random 24-byte nonce per write, so a key may encrypt any
// number of writes. The Kubernetes documentation advises against aescbc,
// which is open to padding oracle attacks, and asks aesgcm's keys, whose
// random 12-byte nonces may repeat, to be rotated every 200,000 writes. KMS
// needs a key service this controller cannot assume. secretbox is not FIPS 140 approved; a platform that needs that
// needs KMS.
//
// The configuration lists its keys with the one the API servers write with
// first; the others only decrypt. identity comes last, so that what was
// stored before encryption, or restored from a snapshot taken before it,
// still reads; the API servers mark such data stale, and write it encrypted
// on the next update, even one that changes nothing (k8s.io/apiserver's etcd3
// store skips an unchanged write only when the data read was not stale).
// Rewrite makes that update for every Secret, a page at a time. A rotation
// (rotate.go) adds a new key to decrypt with, puts it first, rewrites, then
// drops the old one, each step once every API server runs the one before.
//
// No function here returns, logs or wraps anything that holds a key: errors
// name the Secret and what is wrong, never the content.
package encryption
