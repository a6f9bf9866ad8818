package components

import (
	"net"
	"slices"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
)

// Lifetimes of the certificates, unless the spec sets the CA ones.
const (
	DefaultRootCADuration = 10 * 365 * 24 * time.Hour
	DefaultCADuration     = 5 * 365 * 24 * time.Hour
	LeafDuration          = 365 * 24 * time.Hour
	// AdminDuration is short: the admin kubeconfig leaves the management
	// cluster, and the controller renews it long before it expires.
	AdminDuration    = 24 * time.Hour
	AdminRenewBefore = 8 * time.Hour
)

// Secret names of the certificate authorities, as Cluster API names them so
// that its kubeadm bootstrap provider finds the cluster CA for joining workers.
func (in *Input) CASecret() string           { return in.name("ca") }
func (in *Input) EtcdCASecret() string       { return in.name("etcd") }
func (in *Input) FrontProxyCASecret() string { return in.name("proxy") }
func (in *Input) SASecret() string           { return in.name("sa") }

// Secret names of the leaf certificates; each Certificate has its Secret's name.
func (in *Input) APIServerCertSecret() string    { return in.name("apiserver") }
func (in *Input) KubeletClientSecret() string    { return in.name("apiserver-kubelet-client") }
func (in *Input) APIServerEtcdSecret() string    { return in.name("apiserver-etcd-client") }
func (in *Input) FrontProxyClientSecret() string { return in.name("front-proxy-client") }
func (in *Input) EtcdServerSecret() string       { return in.name("etcd-server") }
func (in *Input) EtcdPeerSecret() string         { return in.name("etcd-peer") }
func (in *Input) AdminCertSecret() string        { return in.name("admin") }
func (in *Input) ControllerManagerCertSecret() string {
	return in.name("controller-manager")
}
func (in *Input) SchedulerCertSecret() string          { return in.name("scheduler") }
func (in *Input) KonnectivityServerSecret() string     { return in.name("konnectivity-server") }
func (in *Input) KonnectivityClientCertSecret() string { return in.name("konnectivity-client") }
func (in *Input) TunnelCertSecret() string             { return in.name("kas-tunnel") }

func (in *Input) selfSignedIssuer() string { return in.name("selfsigned") }

// PKI renders the cert-manager Issuers and Certificates of the control plane:
// a self-signed cluster CA (the root), the etcd and front-proxy CAs it signs,
// and every leaf. CA and service account keys survive renewal, so a renewed
// CA still verifies every certificate it signed and tokens stay valid.
func PKI(in *Input) []client.Object {
	rootDuration, caDuration := DefaultRootCADuration, DefaultCADuration
	if d := in.ControlPlane.Spec.Certificates.RootCACertificateDuration; d != nil {
		rootDuration = d.Duration
	}
	if d := in.ControlPlane.Spec.Certificates.CACertificateDuration; d != nil {
		caDuration = d.Duration
	}
	objs := []client.Object{
		in.issuer(in.selfSignedIssuer(), cmv1.IssuerConfig{SelfSigned: &cmv1.SelfSignedIssuer{}}),
		in.ca(in.CASecret(), "kubernetes", in.selfSignedIssuer(), rootDuration),
		in.caIssuer(in.CASecret()),
		in.ca(in.EtcdCASecret(), "etcd-ca", in.CASecret(), caDuration),
		in.caIssuer(in.EtcdCASecret()),
		in.ca(in.FrontProxyCASecret(), "front-proxy-ca", in.CASecret(), caDuration),
		in.caIssuer(in.FrontProxyCASecret()),
	}
	sa := in.leaf(in.SASecret(), in.CASecret(), "service-accounts", nil, cmv1.UsageDigitalSignature)
	sa.Spec.PrivateKey.RotationPolicy = cmv1.RotationPolicyNever
	admin := in.client(in.AdminCertSecret(), in.CASecret(), "kubernetes-admin", "system:masters")
	admin.Spec.Duration = &metav1.Duration{Duration: AdminDuration}
	admin.Spec.RenewBefore = &metav1.Duration{Duration: AdminRenewBefore}
	objs = append(objs,
		sa, admin,
		in.server(in.APIServerCertSecret(), in.CASecret(), "kube-apiserver", in.apiServerSANs()),
		in.client(in.KubeletClientSecret(), in.CASecret(), "kube-apiserver-kubelet-client", "kubeadm:cluster-admins"),
		in.client(in.APIServerEtcdSecret(), in.EtcdCASecret(), "kube-apiserver-etcd-client"),
		in.client(in.FrontProxyClientSecret(), in.FrontProxyCASecret(), "front-proxy-client"),
		in.peer(in.EtcdServerSecret(), "etcd-server"),
		in.peer(in.EtcdPeerSecret(), "etcd-peer"),
		in.client(contract.EtcdHealthcheckSecretName(in.ClusterName()), in.EtcdCASecret(), "kube-etcd-healthcheck-client"),
		in.client(in.ControllerManagerCertSecret(), in.CASecret(), "system:kube-controller-manager"),
		in.client(in.SchedulerCertSecret(), in.CASecret(), "system:kube-scheduler"),
		in.server(in.KonnectivityServerSecret(), in.CASecret(), "konnectivity-server", in.konnectivitySANs()),
		in.client(in.KonnectivityClientCertSecret(), in.CASecret(), "system:konnectivity-server"),
	)
	if in.Listener != nil {
		// The tunnel's outer TLS: nodes verify it with the cluster CA.
		objs = append(objs, in.server(in.TunnelCertSecret(), in.CASecret(), "kas-tunnel", []string{in.TunnelHost()}))
	}
	return objs
}

func (in *Input) issuer(name string, cfg cmv1.IssuerConfig) *cmv1.Issuer {
	return &cmv1.Issuer{
		TypeMeta:   metav1.TypeMeta{APIVersion: cmv1.SchemeGroupVersion.String(), Kind: cmv1.IssuerKind},
		ObjectMeta: in.meta(name, ""),
		Spec:       cmv1.IssuerSpec{IssuerConfig: cfg},
	}
}

// caIssuer signs with the CA in the Secret of the same name.
func (in *Input) caIssuer(secret string) *cmv1.Issuer {
	return in.issuer(secret, cmv1.IssuerConfig{CA: &cmv1.CAIssuer{SecretName: secret}})
}

func (in *Input) certificate(secret, issuer, commonName string, usages ...cmv1.KeyUsage) *cmv1.Certificate {
	return &cmv1.Certificate{
		TypeMeta:   metav1.TypeMeta{APIVersion: cmv1.SchemeGroupVersion.String(), Kind: cmv1.CertificateKind},
		ObjectMeta: in.meta(secret, ""),
		Spec: cmv1.CertificateSpec{
			SecretName:     secret,
			SecretTemplate: &cmv1.CertificateSecretTemplate{Labels: in.Labels("")},
			CommonName:     commonName,
			Duration:       &metav1.Duration{Duration: LeafDuration},
			IssuerRef:      cmmeta.IssuerReference{Kind: cmv1.IssuerKind, Name: issuer},
			Usages:         usages,
			PrivateKey: &cmv1.CertificatePrivateKey{
				Algorithm:      cmv1.ECDSAKeyAlgorithm,
				Size:           256,
				RotationPolicy: cmv1.RotationPolicyAlways,
			},
			RevisionHistoryLimit: ptrInt32(2),
		},
	}
}

func (in *Input) ca(secret, commonName, issuer string, duration time.Duration) *cmv1.Certificate {
	c := in.certificate(secret, issuer, commonName, cmv1.UsageCertSign, cmv1.UsageCRLSign, cmv1.UsageDigitalSignature)
	c.Spec.IsCA = true
	c.Spec.Duration = &metav1.Duration{Duration: duration}
	c.Spec.PrivateKey.RotationPolicy = cmv1.RotationPolicyNever
	return c
}

func (in *Input) leaf(secret, issuer, commonName string, organizations []string, usages ...cmv1.KeyUsage) *cmv1.Certificate {
	c := in.certificate(secret, issuer, commonName, usages...)
	if len(organizations) > 0 {
		c.Spec.Subject = &cmv1.X509Subject{Organizations: organizations}
	}
	return c
}

func (in *Input) client(secret, issuer, commonName string, organizations ...string) *cmv1.Certificate {
	return in.leaf(secret, issuer, commonName, organizations,
		cmv1.UsageDigitalSignature, cmv1.UsageKeyEncipherment, cmv1.UsageClientAuth)
}

func (in *Input) server(secret, issuer, commonName string, sans []string) *cmv1.Certificate {
	c := in.leaf(secret, issuer, commonName, nil,
		cmv1.UsageDigitalSignature, cmv1.UsageKeyEncipherment, cmv1.UsageServerAuth)
	c.Spec.DNSNames, c.Spec.IPAddresses = splitSANs(sans)
	return c
}

// peer is an etcd certificate: members use it both to serve and to connect.
func (in *Input) peer(secret, commonName string) *cmv1.Certificate {
	c := in.leaf(secret, in.EtcdCASecret(), commonName, nil,
		cmv1.UsageDigitalSignature, cmv1.UsageKeyEncipherment, cmv1.UsageServerAuth, cmv1.UsageClientAuth)
	c.Spec.DNSNames, c.Spec.IPAddresses = splitSANs(in.etcdSANs())
	return c
}

// splitSANs sorts names and addresses apart, each sorted and without repeats.
func splitSANs(sans []string) (dns, ips []string) {
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

func ptrInt32(v int32) *int32 { return &v }
