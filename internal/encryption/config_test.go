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

func TestNewConfigIsReadBack(t *testing.T) {
	now := time.Date(2026, 11, 25, 22, 10, 0, 0, time.UTC)
	key := bytes.Repeat([]byte{7}, keySize)
	data, err := NewConfig(bytes.NewReader(key), now)
	require.NoError(t, err)
	assert.Contains(t, string(data), base64.StdEncoding.EncodeToString(key), "the key read from random")
	keys, err := Read(data)
	require.NoError(t, err)
	assert.Equal(t, Keys{Provider: "secretbox", Write: "key-20261125T221000Z", Names: []string{"key-20261125T221000Z"}}, keys)

	other, err := NewRandomConfig(now)
	require.NoError(t, err)
	assert.NotEqual(t, data, other, "two configurations never share a key")
}

func TestNewConfigNeedsRandom(t *testing.T) {
	_, err := NewConfig(strings.NewReader("short"), time.Now())
	require.Error(t, err)
}

// A configuration the API servers cannot encrypt with is refused, and the
// error never quotes it: a key in it would end up in a condition.
func TestReadRefusesWithoutQuoting(t *testing.T) {
	secret := base64.StdEncoding.EncodeToString([]byte("planted-0123456789-planted-01234"))
	short := base64.StdEncoding.EncodeToString([]byte("planted-short"))
	random := make([]byte, keySize)
	_, _ = rand.Read(random)
	for name, data := range map[string]string{
		"not yaml":       "planted: [" + secret,
		"unknown field":  "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nplanted: " + secret,
		"wrong kind":     "apiVersion: v1\nkind: Secret\ndata: {k: " + secret + "}",
		"identity first": config("identity: {}\n  - secretbox: {keys: [{name: k, secret: " + secret + "}]}"),
		"short key":      config("secretbox: {keys: [{name: k, secret: " + short + "}]}"),
		"no keys":        config("secretbox: {keys: []}"),
		"not base64":     config("secretbox: {keys: [{name: k, secret: 'planted!" + secret + "'}]}"),
		"other resource": strings.Replace(config("secretbox: {keys: [{name: k, secret: "+secret+"}]}"), "[secrets]", "[configmaps]", 1),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Read([]byte(data))
			require.ErrorIs(t, err, ErrInvalid)
			assert.NotContains(t, err.Error(), "planted")
			assert.NotContains(t, err.Error(), secret)
		})
	}
	ok := config("aescbc: {keys: [{name: a, secret: " + base64.StdEncoding.EncodeToString(random) + "}, {name: b, secret: " + secret + "}]}\n  - identity: {}")
	keys, err := Read([]byte(ok))
	require.NoError(t, err, "a configuration a user kept with aescbc keys is adopted")
	assert.Equal(t, Keys{Provider: "aescbc", Write: "a", Names: []string{"a", "b"}}, keys)
}

func config(providers string) string {
	return "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - " + providers + "\n"
}
