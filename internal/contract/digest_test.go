package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The digest is stored in annotations of running control planes: it must
// stay what it was, or an upgrade of the controller rolls them all.
func TestDigestIsStable(t *testing.T) {
	sum := sha256.Sum256([]byte("ab"))
	assert.Equal(t, hex.EncodeToString(sum[:])[:16], Digest([]byte("a"), []byte("b")))
	assert.Equal(t, "44feaba663f323f4", Digest([]byte(`{"kind":"Service"}`)))

	data := map[string][]byte{"tls.key": []byte("k"), "ca.crt": []byte("c"), "tls.crt": []byte("t")}
	assert.Equal(t, Digest([]byte("ca.crt"), []byte("c"), []byte("tls.crt"), []byte("t"), []byte("tls.key"), []byte("k")), DataDigest(data))
	assert.Equal(t, Digest(), DataDigest(nil))
}
