package cluster

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeBootstrapGroup is the group kubeadm's node bootstrap tokens carry;
// the hosted control plane's RBAC lets it post and auto-approves its CSRs.
const NodeBootstrapGroup = "system:bootstrappers:kubeadm:default-node-token"

// NewBootstrapToken creates a bootstrap token in the (workload) cluster c
// reaches, as `kubeadm token create` does: a Secret
// kube-system/bootstrap-token-<id> for authentication as a node
// bootstrapper and for signing cluster-info, valid for ttl. It returns the
// token, <id>.<secret>.
func NewBootstrapToken(ctx context.Context, c client.Client, ttl time.Duration) (string, error) {
	id, err := randomToken(6)
	if err != nil {
		return "", err
	}
	secret, err := randomToken(16)
	if err != nil {
		return "", err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "bootstrap-token-" + id},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id":                       id,
			"token-secret":                   secret,
			"expiration":                     time.Now().Add(ttl).UTC().Format(time.RFC3339),
			"usage-bootstrap-authentication": "true",
			"usage-bootstrap-signing":        "true",
			"auth-extra-groups":              NodeBootstrapGroup,
			"description":                    "end-to-end test worker",
		},
	}
	if err := c.Create(ctx, s); err != nil {
		return "", fmt.Errorf("create bootstrap token Secret: %w", err)
	}
	return id + "." + secret, nil
}

// randomToken is n characters of [a-z0-9], the alphabet of bootstrap
// tokens.
func randomToken(n int) (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	for i := range b {
		// 256 is not a multiple of 36; the bias does not matter for a test.
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b), nil
}

// CACertHash is the public key pin of a CA certificate (PEM) as `kubeadm
// join --discovery-token-ca-cert-hash` takes it: sha256:<hex> of the
// certificate's SubjectPublicKeyInfo.
func CACertHash(caPEM []byte) (string, error) {
	block, _ := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", errors.New("CA certificate: no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("CA certificate: %w", err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
