package encryption

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"
)

// Provider is the EncryptionConfiguration provider of the keys this package
// generates.
const Provider = "secretbox"

// keySize is a secretbox key's size.
const keySize = 32

// encryptedResource is the resource encrypted.
const encryptedResource = "secrets"

// NewConfig is an EncryptionConfiguration with one new secretbox key read
// from random (crypto/rand.Reader outside tests), named after now, and
// identity after it for what was stored before.
func NewConfig(random io.Reader, now time.Time) ([]byte, error) {
	key := make([]byte, keySize)
	if _, err := io.ReadFull(random, key); err != nil {
		return nil, fmt.Errorf("generate an encryption key: %w", err)
	}
	cfg := apiserverv1.EncryptionConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: apiserverv1.SchemeGroupVersion.String(), Kind: "EncryptionConfiguration"},
		Resources: []apiserverv1.ResourceConfiguration{{
			Resources: []string{encryptedResource},
			Providers: []apiserverv1.ProviderConfiguration{secretbox(KeyName(now), key), {Identity: &apiserverv1.IdentityConfiguration{}}},
		}},
	}
	return yaml.Marshal(cfg)
}

// secretbox is a secretbox provider of one key.
func secretbox(name string, key []byte) apiserverv1.ProviderConfiguration {
	return apiserverv1.ProviderConfiguration{Secretbox: &apiserverv1.SecretboxConfiguration{Keys: []apiserverv1.Key{{
		Name: name, Secret: base64.StdEncoding.EncodeToString(key),
	}}}}
}

// NewRandomConfig is NewConfig with keys from crypto/rand.
func NewRandomConfig(now time.Time) ([]byte, error) { return NewConfig(rand.Reader, now) }

// KeyName names a key generated at t: names tell keys apart in etcd, where
// each value stored encrypted starts with k8s:enc:secretbox:v1:<name>:.
func KeyName(t time.Time) string { return "key-" + t.UTC().Format("20060102T150405Z") }

// Keys are what a configuration says of the keys of Secrets, never the keys
// themselves.
type Keys struct {
	// Provider encrypts what the API servers write.
	Provider string
	// Write names the key the API servers write with.
	Write string
	// Names are every key that decrypts, Write first.
	Names []string
}

// ErrInvalid is the error Read returns for a configuration the API servers
// cannot use to encrypt Secrets. It never carries the content.
var ErrInvalid = errors.New("not an EncryptionConfiguration (apiserver.config.k8s.io/v1) that encrypts secrets with a secretbox, aescbc or aesgcm key first")

// Read checks that data is a configuration whose first provider for
// Secrets encrypts with keys that decode, and says which keys it holds.
// Whatever is wrong, the error is ErrInvalid: a parser's message could
// quote the content, keys included.
func Read(data []byte) (Keys, error) {
	var cfg apiserverv1.EncryptionConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return Keys{}, ErrInvalid
	}
	if cfg.APIVersion != apiserverv1.SchemeGroupVersion.String() || cfg.Kind != "EncryptionConfiguration" {
		return Keys{}, ErrInvalid
	}
	for _, r := range cfg.Resources {
		for _, res := range r.Resources {
			// "*." is every resource of the core group, "*.*" every resource.
			if res != encryptedResource && res != "*." && res != "*.*" {
				continue
			}
			if len(r.Providers) == 0 {
				return Keys{}, ErrInvalid
			}
			return first(r.Providers[0])
		}
	}
	return Keys{}, ErrInvalid
}

// first is what the first provider says of its keys.
func first(p apiserverv1.ProviderConfiguration) (Keys, error) {
	var provider string
	var keys []apiserverv1.Key
	var size map[int]bool
	switch {
	case p.Secretbox != nil:
		provider, keys, size = Provider, p.Secretbox.Keys, map[int]bool{keySize: true}
	case p.AESCBC != nil:
		provider, keys, size = "aescbc", p.AESCBC.Keys, map[int]bool{16: true, 24: true, 32: true}
	case p.AESGCM != nil:
		provider, keys, size = "aesgcm", p.AESGCM.Keys, map[int]bool{16: true, 24: true, 32: true}
	default:
		return Keys{}, ErrInvalid
	}
	if len(keys) == 0 {
		return Keys{}, ErrInvalid
	}
	k := Keys{Provider: provider, Write: keys[0].Name}
	for _, key := range keys {
		raw, err := base64.StdEncoding.DecodeString(key.Secret)
		if err != nil || !size[len(raw)] || key.Name == "" {
			return Keys{}, ErrInvalid
		}
		k.Names = append(k.Names, key.Name)
	}
	return k, nil
}
