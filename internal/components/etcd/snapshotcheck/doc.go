// Package snapshotcheck checks an etcd snapshot as it streams past, the way
// etcdutl checks one before restoring it: a database of whole 512-byte
// pages followed by its sha256. The backup controller checks each snapshot
// it uploads with it, and the etcd-restore init container each snapshot it
// downloads, before the member's data is replaced. It imports nothing
// beyond the standard library, so that both carry it cheaply.
package snapshotcheck
