package encryption

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A rotation adds the new key to decrypt, puts it first to encrypt, then
// drops the key that encrypted before; identity stays last throughout, and
// each step refuses a configuration not at the step before.
func TestRotationSteps(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 22, 10, 0, 0, time.UTC)
	first, err := NewConfig(bytes.NewReader(bytes.Repeat([]byte{1}, keySize)), t0)
	require.NoError(t, err)

	_, err = Promote(first, "key-20261126T050000Z")
	require.ErrorIs(t, err, ErrNotRotating)
	_, err = Drop(first, "key-20261126T050000Z")
	require.ErrorIs(t, err, ErrNotRotating)

	t1 := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	added, name, err := AddKey(first, bytes.NewReader(bytes.Repeat([]byte{2}, keySize)), t1)
	require.NoError(t, err)
	assert.Equal(t, "key-20261126T050000Z", name)
	keys, err := Read(added)
	require.NoError(t, err)
	assert.Equal(t, "key-20261125T221000Z", keys.Write, "the old key still encrypts")
	assert.Contains(t, string(added), base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, keySize)))
	assert.Less(t, strings.Index(string(added), "key-20261125T221000Z"), strings.Index(string(added), name))
	assert.Contains(t, string(added), "identity: {}\n  resources:", "identity last")

	_, err = Drop(added, name)
	require.ErrorIs(t, err, ErrNotRotating, "not before the new key encrypts")
	_, same, err := AddKey(first, rand.Reader, t0)
	require.NoError(t, err)
	assert.Equal(t, "key-20261125T221000Z-2", same, "a key of the same second gets a number")

	promoted, err := Promote(added, name)
	require.NoError(t, err)
	keys, err = Read(promoted)
	require.NoError(t, err)
	assert.Equal(t, name, keys.Write)
	assert.Contains(t, string(promoted), "key-20261125T221000Z", "the old key still decrypts")

	dropped, err := Drop(promoted, name)
	require.NoError(t, err)
	keys, err = Read(dropped)
	require.NoError(t, err)
	assert.Equal(t, Keys{Provider: Provider, Write: name, Names: []string{name}}, keys)
	assert.NotContains(t, string(dropped), "key-20261125T221000Z")
	assert.NotContains(t, string(dropped), base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, keySize)))
	assert.Contains(t, string(dropped), "identity: {}\n  resources:", "identity last")

	_, err = Drop(dropped, name)
	require.ErrorIs(t, err, ErrNotRotating, "identity is never dropped")
}

// A configuration a user kept with aescbc keys is rotated to secretbox: the
// whole provider that encrypted before goes with the drop.
func TestRotationOfAKeptConfiguration(t *testing.T) {
	random := make([]byte, keySize)
	_, _ = rand.Read(random)
	kept := config("aescbc: {keys: [{name: a, secret: " + base64.StdEncoding.EncodeToString(random) + "}, {name: b, secret: " +
		base64.StdEncoding.EncodeToString(random) + "}]}\n  - identity: {}")
	added, name, err := AddKey([]byte(kept), rand.Reader, time.Now())
	require.NoError(t, err)
	promoted, err := Promote(added, name)
	require.NoError(t, err)
	dropped, err := Drop(promoted, name)
	require.NoError(t, err)
	keys, err := Read(dropped)
	require.NoError(t, err)
	assert.Equal(t, Keys{Provider: Provider, Write: name, Names: []string{name}}, keys)
	assert.NotContains(t, string(dropped), "aescbc")
}

// Nothing a rotation step refuses is quoted.
func TestRotationRefusesWithoutQuoting(t *testing.T) {
	planted := "planted: [" + base64.StdEncoding.EncodeToString([]byte("planted-0123456789-planted-01234"))
	_, _, err := AddKey([]byte(planted), rand.Reader, time.Now())
	require.ErrorIs(t, err, ErrInvalid)
	assert.NotContains(t, err.Error(), "planted")
	_, err = Promote([]byte(planted), "k")
	require.ErrorIs(t, err, ErrInvalid)
}
