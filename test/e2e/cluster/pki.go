package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// keyPair is a certificate with its private key.
type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// certValidity covers any test run and a quickstart left running for a while.
const certValidity = 30 * 24 * time.Hour

func newKeyPair(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Minute)
	tmpl.NotAfter = time.Now().Add(certValidity)
	signer, signerCert := key, tmpl
	if parent != nil {
		signer, signerCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

// newCA is a self-signed certificate authority.
func newCA(name string) (*keyPair, error) {
	return newKeyPair(&x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		IsCA:                  true,
		BasicConstraintsValid: true,
	}, nil)
}

// issue signs a leaf for a client (user name and groups) or, with hosts,
// for a server as well.
func (ca *keyPair) issue(name string, groups []string, hosts ...string) (*keyPair, error) {
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

func (kp *keyPair) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.cert.Raw})
}

func (kp *keyPair) keyPEM() ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(kp.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// write stores the pair as <name>.crt and <name>.key in dir.
func (kp *keyPair) write(dir, name string) error {
	key, err := kp.keyPEM()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), kp.certPEM(), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), key, 0o600)
}

// writePublicKey stores the public half of the pair as <name>.pub in dir,
// as the API server reads service account keys.
func (kp *keyPair) writePublicKey(dir, name string) error {
	der, err := x509.MarshalPKIXPublicKey(&kp.key.PublicKey)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, name+".pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600)
}
