package netfail

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
)

// Describe says, in words that quote nothing of the request (its
// host, its URL), why a request got no answer; "" for an error that is not
// such a failure. The errors themselves quote the address dialled.
func Describe(err error) string {
	var (
		dns       *net.DNSError
		unknownCA x509.UnknownAuthorityError
		wrongHost x509.HostnameError
		badCert   x509.CertificateInvalidError
		notTLS    tls.RecordHeaderError
		netErr    net.Error
		urlErr    *url.Error
		opErr     *net.OpError
		isRequest = errors.As(err, &urlErr) || errors.As(err, &opErr)
	)
	switch {
	case errors.As(err, &dns):
		return "its host name does not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the connection was refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the connection was closed before an answer"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "there is no route to it"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "it did not answer in time"
	case errors.As(err, &unknownCA):
		return "its certificate is not signed by a CA the client trusts (the backup Secret's CA key, or the system's roots)"
	case errors.As(err, &wrongHost):
		return "its certificate is not valid for its host name"
	case errors.As(err, &badCert):
		return "its certificate is not valid (expired, not yet valid, or not for serving)"
	case errors.As(err, &notTLS), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "it does not answer in TLS"
	case isRequest:
		return "the connection failed"
	}
	return ""
}
