package tlstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"
)

// KeyType selects the key algorithm of a certificate.
type KeyType int

// The key algorithms Envoy (and Legate) accept.
const (
	ECDSA KeyType = iota // P-256, the default: fast to generate
	RSA                  // 2048 bits
	Ed25519
)

// Options describe a certificate. Zero fields take the stated defaults.
type Options struct {
	CommonName string
	DNSNames   []string
	URIs       []string
	IPs        []string
	Emails     []string
	// Serial defaults to a random 64-bit number.
	Serial *big.Int
	// NotBefore defaults to an hour ago, NotAfter to 30 days after NotBefore.
	NotBefore, NotAfter time.Time
	Key                 KeyType
	IsCA                bool
	// ExtKeyUsage defaults to none (usable for client and server).
	ExtKeyUsage []x509.ExtKeyUsage
}

// Cert is a certificate with its key, in parsed and PEM forms.
type Cert struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte // PKCS#8
}

// NewCA returns a self-signed CA certificate.
func NewCA(t testing.TB, o Options) *Cert {
	t.Helper()
	o.IsCA = true
	if o.CommonName == "" {
		o.CommonName = "Legate Test CA"
	}
	return create(t, o, nil)
}

// SelfSigned returns a self-signed leaf certificate.
func SelfSigned(t testing.TB, o Options) *Cert {
	t.Helper()
	return create(t, o, nil)
}

// Issue returns a certificate signed by ca.
func (ca *Cert) Issue(t testing.TB, o Options) *Cert {
	t.Helper()
	return create(t, o, ca)
}

// CRL returns a PEM CRL signed by ca listing revoked, valid from an hour
// ago for a day.
func (ca *Cert) CRL(t testing.TB, revoked ...*Cert) []byte {
	t.Helper()
	now := time.Now()
	tmpl := &x509.RevocationList{
		Number:     big.NewInt(1),
		ThisUpdate: now.Add(-time.Hour),
		NextUpdate: now.Add(24 * time.Hour),
	}
	for _, r := range revoked {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, x509.RevocationListEntry{
			SerialNumber: r.Cert.SerialNumber, RevocationTime: now.Add(-time.Minute),
		})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		t.Fatalf("tlstest: create CRL: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
}

func newKey(t testing.TB, k KeyType) crypto.Signer {
	t.Helper()
	var key crypto.Signer
	var err error
	switch k {
	case RSA:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case Ed25519:
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatalf("tlstest: generate key: %v", err)
	}
	return key
}

func create(t testing.TB, o Options, issuer *Cert) *Cert {
	t.Helper()
	key := newKey(t, o.Key)
	serial := o.Serial
	if serial == nil {
		var err error
		if serial, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63)); err != nil {
			t.Fatalf("tlstest: serial: %v", err)
		}
	}
	notBefore, notAfter := o.NotBefore, o.NotAfter
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-time.Hour)
	}
	if notAfter.IsZero() {
		notAfter = notBefore.Add(30 * 24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: o.CommonName},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		DNSNames:              o.DNSNames,
		EmailAddresses:        o.Emails,
		ExtKeyUsage:           o.ExtKeyUsage,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  o.IsCA,
	}
	if _, isRSA := key.(*rsa.PrivateKey); isRSA {
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	if o.IsCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	}
	for _, u := range o.URIs {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatalf("tlstest: URI %q: %v", u, err)
		}
		tmpl.URIs = append(tmpl.URIs, p)
	}
	for _, s := range o.IPs {
		ip := net.ParseIP(s)
		if ip == nil {
			t.Fatalf("tlstest: IP %q does not parse", s)
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	parent, signer := tmpl, key
	if issuer != nil {
		parent, signer = issuer.Cert, issuer.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		t.Fatalf("tlstest: create certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlstest: parse certificate: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("tlstest: marshal key: %v", err)
	}
	return &Cert{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}
