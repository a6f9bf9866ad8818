package render

import (
	"net"
	"slices"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Secret names of the certificate authorities and the service account key,
// as Cluster API names them so that its kubeadm bootstrap provider finds the
// cluster CA for joining workers. Components mount them and sign with them;
// the PKI component issues them.
func (in Input) CASecret() string           { return in.Name("ca") }
func (in Input) EtcdCASecret() string       { return in.Name("etcd") }
func (in Input) FrontProxyCASecret() string { return in.Name("proxy") }
func (in Input) SASecret() string           { return in.Name("sa") }

// SANextSecret holds the new service account key while a rotation runs.
func (in Input) SANextSecret() string { return in.Name("sa-next") }

// Issuer is a cert-manager Issuer of the control plane.
func (in Input) Issuer(name string, cfg cmv1.IssuerConfig) *cmv1.Issuer {
	return &cmv1.Issuer{
		TypeMeta:   metav1.TypeMeta{APIVersion: cmv1.SchemeGroupVersion.String(), Kind: cmv1.IssuerKind},
		ObjectMeta: in.Meta(name, ""),
		Spec:       cmv1.IssuerSpec{IssuerConfig: cfg},
	}
}

// Lifetimes are the durations the control plane's certificates are
// issued with, from spec.certificates.
func (in Input) Lifetimes() contract.Lifetimes {
	return contract.CertificateLifetimes(in.ControlPlane.Spec.Certificates)
}

// Certificate is a leaf certificate, with a new key at every renewal, whose
// Secret has its name and the control plane's labels. cert-manager renews
// it when two thirds of its lifetime have passed (its default).
func (in Input) Certificate(secret, issuer, commonName string, usages ...cmv1.KeyUsage) *cmv1.Certificate {
	return &cmv1.Certificate{
		TypeMeta:   metav1.TypeMeta{APIVersion: cmv1.SchemeGroupVersion.String(), Kind: cmv1.CertificateKind},
		ObjectMeta: in.Meta(secret, ""),
		Spec: cmv1.CertificateSpec{
			SecretName:     secret,
			SecretTemplate: &cmv1.CertificateSecretTemplate{Labels: in.Labels("")},
			CommonName:     commonName,
			Duration:       &metav1.Duration{Duration: in.Lifetimes().Leaf},
			IssuerRef:      cmmeta.IssuerReference{Kind: cmv1.IssuerKind, Name: issuer},
			Usages:         usages,
			PrivateKey: &cmv1.CertificatePrivateKey{
				Algorithm:      cmv1.ECDSAKeyAlgorithm,
				Size:           256,
				RotationPolicy: cmv1.RotationPolicyAlways,
			},
			RevisionHistoryLimit: ptr.To[int32](2),
		},
	}
}

// Leaf is a Certificate whose subject has organizations, when given.
func (in Input) Leaf(secret, issuer, commonName string, organizations []string, usages ...cmv1.KeyUsage) *cmv1.Certificate {
	c := in.Certificate(secret, issuer, commonName, usages...)
	if len(organizations) > 0 {
		c.Spec.Subject = &cmv1.X509Subject{Organizations: organizations}
	}
	return c
}

// ClientCertificate is a client certificate of user commonName in groups
// organizations.
func (in Input) ClientCertificate(secret, issuer, commonName string, organizations ...string) *cmv1.Certificate {
	return in.Leaf(secret, issuer, commonName, organizations,
		cmv1.UsageDigitalSignature, cmv1.UsageKeyEncipherment, cmv1.UsageClientAuth)
}

// ServerCertificate is a serving certificate for sans.
func (in Input) ServerCertificate(secret, issuer, commonName string, sans []string) *cmv1.Certificate {
	c := in.Leaf(secret, issuer, commonName, nil,
		cmv1.UsageDigitalSignature, cmv1.UsageKeyEncipherment, cmv1.UsageServerAuth)
	c.Spec.DNSNames, c.Spec.IPAddresses = SplitSANs(sans)
	return c
}

// SplitSANs sorts names and addresses apart, each sorted and without repeats.
func SplitSANs(sans []string) (dns, ips []string) {
	for _, san := range sans {
		if net.ParseIP(san) != nil {
			ips = append(ips, san)
		} else if san != "" {
			dns = append(dns, san)
		}
	}
	slices.Sort(dns)
	slices.Sort(ips)
	return slices.Compact(dns), slices.Compact(ips)
}
