package encryption

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"
)

// A rotation writes three configurations, each from the one before, on
// the providers for Secrets (the first resource entry that covers them):
//
//	AddKey:  [old, new, rest...]  the new key decrypts; the old one encrypts
//	Promote: [new, old, rest...]  the new key encrypts; the old one decrypts
//	Drop:    [new, rest...]       once every Secret was rewritten
//
// where new is a secretbox provider of one new key and old is whatever
// provider encrypted before (its keys all go with it). rest keeps identity,
// so that what a snapshot taken before encryption holds still reads.

// ErrNotRotating is the error Promote and Drop return for a configuration
// that is not at the step before theirs.
var ErrNotRotating = errors.New("the encryption configuration is not at this step of a rotation")

// AddKey is the configuration in data with a new secretbox key read from
// random, named after now, as the second provider for Secrets: the API
// servers decrypt with it and still encrypt with the first. It returns the
// key's name.
func AddKey(data []byte, random io.Reader, now time.Time) ([]byte, string, error) {
	cfg, providers, err := secretsProviders(data)
	if err != nil {
		return nil, "", err
	}
	// Names tell keys apart in etcd: one generated in the same second as
	// another gets a number.
	name := KeyName(now)
	for i := 2; slices.ContainsFunc(*providers, func(p apiserverv1.ProviderConfiguration) bool { return named(p, name) }); i++ {
		name = fmt.Sprintf("%s-%d", KeyName(now), i)
	}
	key := make([]byte, keySize)
	if _, err := io.ReadFull(random, key); err != nil {
		return nil, "", fmt.Errorf("generate an encryption key: %w", err)
	}
	p := *providers
	*providers = append([]apiserverv1.ProviderConfiguration{p[0], secretbox(name, key)}, p[1:]...)
	out, err := yaml.Marshal(cfg)
	return out, name, err
}

// Promote is the configuration in data, which AddKey wrote for key name,
// with that key first: the API servers encrypt with it.
func Promote(data []byte, name string) ([]byte, error) {
	cfg, providers, err := secretsProviders(data)
	if err != nil {
		return nil, err
	}
	p := *providers
	if len(p) < 2 || !only(p[1], name) {
		return nil, ErrNotRotating
	}
	p[0], p[1] = p[1], p[0]
	return yaml.Marshal(cfg)
}

// Drop is the configuration in data, which Promote wrote for key name,
// without the provider that encrypted before it.
func Drop(data []byte, name string) ([]byte, error) {
	cfg, providers, err := secretsProviders(data)
	if err != nil {
		return nil, err
	}
	p := *providers
	if len(p) < 2 || !only(p[0], name) || p[1].Identity != nil {
		return nil, ErrNotRotating
	}
	*providers = slices.Delete(p, 1, 2)
	return yaml.Marshal(cfg)
}

// secretsProviders parses data, which Read accepts, and finds the
// providers of its entry for Secrets.
func secretsProviders(data []byte) (*apiserverv1.EncryptionConfiguration, *[]apiserverv1.ProviderConfiguration, error) {
	if _, err := Read(data); err != nil {
		return nil, nil, err
	}
	cfg := &apiserverv1.EncryptionConfiguration{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, nil, ErrInvalid
	}
	for i := range cfg.Resources {
		for _, res := range cfg.Resources[i].Resources {
			if res == encryptedResource || res == "*." || res == "*.*" {
				return cfg, &cfg.Resources[i].Providers, nil
			}
		}
	}
	return nil, nil, ErrInvalid
}

// named tells whether p holds a key named name.
func named(p apiserverv1.ProviderConfiguration, name string) bool {
	var keys []apiserverv1.Key
	switch {
	case p.Secretbox != nil:
		keys = p.Secretbox.Keys
	case p.AESCBC != nil:
		keys = p.AESCBC.Keys
	case p.AESGCM != nil:
		keys = p.AESGCM.Keys
	}
	return slices.ContainsFunc(keys, func(k apiserverv1.Key) bool { return k.Name == name })
}

// only tells whether p is a secretbox provider of key name alone.
func only(p apiserverv1.ProviderConfiguration, name string) bool {
	return p.Secretbox != nil && len(p.Secretbox.Keys) == 1 && p.Secretbox.Keys[0].Name == name
}
