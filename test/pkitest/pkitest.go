package pkitest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// KeyPair is a certificate with its private key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// certValidity covers any test run and a quickstart left running for a while.
const certValidity = 30 * 24 * time.Hour

func newKeyPair(tmpl *x509.Certificate, parent *KeyPair) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl.NotBefore = time.Now().Add(-time.Minute)
	tmpl.NotAfter = time.Now().Add(certValidity)
	if parent == nil {
		return sign(tmpl, &KeyPair{Cert: tmpl, Key: key}, key)
	}
	return sign(tmpl, parent, key)
}

// sign is the certificate of key that tmpl describes, with a new serial
// number, signed by parent.
func sign(tmpl *x509.Certificate, parent *KeyPair, key crypto.Signer) (*KeyPair, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent.Cert, key.Public(), parent.Key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// NewCA is a self-signed certificate authority.
func NewCA(name string) (*KeyPair, error) {
	return newKeyPair(&x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		IsCA:                  true,
		BasicConstraintsValid: true,
	}, nil)
}

// Renewed is another certificate of the self-signed CA, of the same
// subject and key, as cert-manager renews a CA whose key it keeps.
func (ca *KeyPair) Renewed() (*KeyPair, error) {
	tmpl := *ca.Cert
	return sign(&tmpl, ca, ca.Key)
}

// Issue signs a leaf for a client (user name and groups) or, with hosts
// (DNS names or IP addresses), for a server as well.
func (ca *KeyPair) Issue(name string, groups []string, hosts ...string) (*KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return newKeyPair(tmpl, ca)
}

// Parse is the pair a PEM encoded certificate and private key (PKCS #1,
// PKCS #8 or SEC 1, as cert-manager writes them in a Secret's tls.crt and
// tls.key) make: a CA of a cluster that tests then sign with.
func Parse(certPEM, keyPEM []byte) (*KeyPair, error) {
	certBlock, _ := pem.Decode(certPEM)
	keyBlock, _ := pem.Decode(keyPEM)
	if certBlock == nil || keyBlock == nil {
		return nil, errors.New("no PEM block in the certificate or the key")
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := parseKey(keyBlock.Bytes)
	if err != nil {
		return nil, err
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

func parseKey(der []byte) (crypto.Signer, error) {
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, err
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a private key of %T cannot sign", k)
	}
	return signer, nil
}

// TLSCertificate is the pair as a client or server presents it, with the
// certificates of chain (its issuers, for a peer that trusts only a root
// above them) after its own.
func (kp *KeyPair) TLSCertificate(chain ...*KeyPair) tls.Certificate {
	c := tls.Certificate{Certificate: [][]byte{kp.Cert.Raw}, PrivateKey: kp.Key, Leaf: kp.Cert}
	for _, issuer := range chain {
		c.Certificate = append(c.Certificate, issuer.Cert.Raw)
	}
	return c
}

// CertPEM is the certificate, PEM encoded.
func (kp *KeyPair) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.Cert.Raw})
}

// KeyPEM is the private key, PEM encoded (SEC 1): one this package made.
func (kp *KeyPair) KeyPEM() ([]byte, error) {
	key, ok := kp.Key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("only the ECDSA keys this package makes are written, not a %T", kp.Key)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// Write stores the pair as <name>.crt and <name>.key in dir.
func (kp *KeyPair) Write(dir, name string) error {
	key, err := kp.KeyPEM()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), kp.CertPEM(), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), key, 0o600)
}

// WritePublicKey stores the public half of the pair as <name>.pub in dir,
// as the API server reads service account keys.
func (kp *KeyPair) WritePublicKey(dir, name string) error {
	der, err := x509.MarshalPKIXPublicKey(kp.Key.Public())
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, name+".pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600)
}
