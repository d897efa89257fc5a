package accesslog

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"strings"

	"github.com/legateproxy/legate/tlsutil"
)

// TLSInfo is what an entry knows about its downstream TLS connection: the negotiated state
// (version, cipher suite, SNI, the peer's verified or presented chain) and the certificate
// the proxy presented. The %DOWNSTREAM_TLS_*%, %DOWNSTREAM_PEER_*% and %DOWNSTREAM_LOCAL_*%
// operators and the gRPC entries' tls_properties read it. Immutable once logged.
type TLSInfo struct {
	// State is the handshake's result.
	State tls.ConnectionState
	// Local is the certificate the proxy presented; nil when unknown (a resumed session).
	Local *x509.Certificate
}

// Peer returns the peer's leaf certificate; nil when the peer sent none.
func (t *TLSInfo) Peer() *x509.Certificate {
	if t == nil || len(t.State.PeerCertificates) == 0 {
		return nil
	}
	return t.State.PeerCertificates[0]
}

// VersionName returns the protocol version as Envoy (BoringSSL's SSL_get_version) prints it:
// "TLSv1", "TLSv1.1", "TLSv1.2" or "TLSv1.3"; "" when unknown.
func (t *TLSInfo) VersionName() string {
	if t == nil {
		return ""
	}
	return tlsutil.VersionName(t.State.Version)
}

// CipherName returns the cipher suite as BoringSSL names it (SSL_CIPHER_get_name):
// "ECDHE-RSA-AES128-GCM-SHA256" for TLS 1.2 suites, the IANA name for TLS 1.3 ones; "" when
// unknown.
func (t *TLSInfo) CipherName() string {
	if t == nil {
		return ""
	}
	return tlsutil.CipherName(t.State.CipherSuite)
}

// subjectString prints a certificate's subject or issuer as Envoy does (RFC 2253 order).
func subjectString(c *x509.Certificate, issuer bool) string {
	if c == nil {
		return ""
	}
	if issuer {
		return c.Issuer.String()
	}
	return c.Subject.String()
}

// sanKind selects one kind of subject alternative name.
type sanKind uint8

const (
	sanURI sanKind = iota
	sanDNS
	sanIP
	sanEmail
)

// sans returns the subject alternative names of one kind, in certificate order.
func sans(c *x509.Certificate, k sanKind) []string {
	if c == nil {
		return nil
	}
	var out []string
	switch k {
	case sanURI:
		for _, u := range c.URIs {
			out = append(out, u.String())
		}
	case sanDNS:
		out = c.DNSNames
	case sanIP:
		for _, ip := range c.IPAddresses {
			out = append(out, ip.String())
		}
	case sanEmail:
		out = c.EmailAddresses
	}
	return out
}

// serialHex prints a serial number as Envoy does: lower-case hex without leading zeros.
func serialHex(c *x509.Certificate) string {
	if c == nil || c.SerialNumber == nil {
		return ""
	}
	return strings.ToLower(c.SerialNumber.Text(16))
}

// appendTLS appends the value of a TLS operator.
func appendTLS(dst []byte, s *segment, e *Entry) ([]byte, bool) {
	t := e.DownstreamTLS
	if t == nil {
		return dst, false
	}
	var cert *x509.Certificate
	switch s.op {
	case opLocalSubject, opLocalURISAN, opLocalDNSSAN, opLocalIPSAN, opLocalEmailSAN:
		cert = t.Local
	default:
		cert = t.Peer()
	}
	var str string
	switch s.op {
	case opTLSVersion:
		str = t.VersionName()
	case opTLSCipher:
		str = t.CipherName()
	case opPeerSubject, opLocalSubject:
		str = subjectString(cert, false)
	case opPeerIssuer:
		str = subjectString(cert, true)
	case opPeerURISAN, opLocalURISAN:
		str = strings.Join(sans(cert, sanURI), ",")
	case opPeerDNSSAN, opLocalDNSSAN:
		str = strings.Join(sans(cert, sanDNS), ",")
	case opPeerIPSAN, opLocalIPSAN:
		str = strings.Join(sans(cert, sanIP), ",")
	case opPeerEmailSAN, opLocalEmailSAN:
		str = strings.Join(sans(cert, sanEmail), ",")
	case opPeerSerial:
		str = serialHex(cert)
	case opPeerFingerprint256, opPeerFingerprint1:
		if cert == nil {
			return dst, false
		}
		mark := len(dst)
		if s.op == opPeerFingerprint256 {
			sum := sha256.Sum256(cert.Raw)
			dst = hex.AppendEncode(dst, sum[:])
		} else {
			sum := sha1.Sum(cert.Raw)
			dst = hex.AppendEncode(dst, sum[:])
		}
		return truncateTail(dst, mark, s.maxLen), true
	}
	if str == "" {
		return dst, false
	}
	return append(dst, truncate(str, s.maxLen)...), true
}

// URISANs returns the URI subject alternative names of c, in certificate order.
func URISANs(c *x509.Certificate) []string { return sans(c, sanURI) }

// DNSSANs returns the DNS subject alternative names of c, in certificate order.
func DNSSANs(c *x509.Certificate) []string { return sans(c, sanDNS) }
