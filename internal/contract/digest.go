package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
)

// Digest is the digest the controller writes into annotations (what it last
// applied, what the Secrets a pod mounts hold): the first 16 hex digits of
// the SHA-256 of parts, one after the other. Every stored annotation depends
// on it, so changing it would roll every control plane.
func Digest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		_, _ = h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// DataDigest is the Digest of a Secret's or ConfigMap's data: each key and
// its value, in key order.
func DataDigest(data map[string][]byte) string {
	parts := make([][]byte, 0, 2*len(data))
	for _, k := range slices.Sorted(maps.Keys(data)) {
		parts = append(parts, []byte(k), data[k])
	}
	return Digest(parts...)
}
