package tlsutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"time"

	"github.com/legateproxy/legate/internal/clock"
)

// Deps are what a context needs from outside. Every field may be nil.
type Deps struct {
	// Secrets resolves sds_secret_config names; nil makes any such name an
	// error.
	Secrets SecretProvider
	// Registry lists the context in /certs; nil leaves it unlisted.
	Registry *Registry
	// Now is the clock for certificate validity and CRL checks; nil is
	// the system clock.
	Now func() time.Time
	// ReadFile and LookupEnv read filename and environment_variable data
	// sources; nil is os.ReadFile and os.LookupEnv.
	ReadFile  func(name string) ([]byte, error)
	LookupEnv func(key string) (string, bool)
	// Stats and StatPrefix are where the context's handshakes are counted:
	// the ssl.* stats of the scope StatPrefix ("listener.127.0.0.1_10000.",
	// "cluster.web."), shared with the scope's other contexts. Nil or empty
	// counts nothing.
	Stats      *StatsScopes
	StatPrefix string
}

func (d *Deps) readFile(name string) ([]byte, error) {
	if d.ReadFile != nil {
		return d.ReadFile(name)
	}
	return os.ReadFile(name)
}

func (d *Deps) lookupEnv(key string) (string, bool) {
	if d.LookupEnv != nil {
		return d.LookupEnv(key)
	}
	return os.LookupEnv(key)
}

func (d *Deps) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return clock.Real().Now()
}

// secret resolves name to a secret holding what want says, or explains why
// not. path names the sds_secret_config field.
func (d *Deps) secret(path, name, want string, has func(Secret) bool) (Secret, error) {
	if d.Secrets == nil {
		return Secret{}, fmt.Errorf("%s.name = %q: no secret provider; secrets come from static_resources.secrets or SDS", path, name)
	}
	s, ok := d.Secrets.Secret(name)
	if !ok {
		return Secret{}, fmt.Errorf("%s.name = %q: unknown secret", path, name)
	}
	if !has(s) {
		return Secret{}, fmt.Errorf("%s.name = %q: secret holds no %s", path, name, want)
	}
	return s, nil
}

// loadedCert is a certificate shown by /certs and the source it came from.
type loadedCert struct {
	cert *x509.Certificate
	path string // DataSource.DisplayPath
}

// material is what one load of a context produced. It is immutable once
// published through the context's atomic pointer.
type material struct {
	certs  []tls.Certificate
	chain  []loadedCert // the leaf of each entry of certs, same order
	ca     *loadedCert  // first trusted_ca certificate, or nil
	verify *verifier    // nil: peers are not verified
	// validation is the resolved (merged) validation context, or nil.
	validation *ValidationConfig
	// client is a client context's configuration for this load.
	client *clientLoad
	// handshake is a server context's per-handshake configuration.
	handshake *tls.Config
}

// loadCommon reads the certificates and validation context of c. path
// names the common_tls_context field.
func loadCommon(path string, c *CommonConfig, deps *Deps, usage x509.ExtKeyUsage) (*material, error) {
	m := &material{}
	add := func(p string, cc *CertificateConfig) error {
		cert, err := loadCertificate(p, cc, deps)
		if err != nil {
			return err
		}
		m.certs = append(m.certs, cert)
		m.chain = append(m.chain, loadedCert{cert: cert.Leaf, path: cc.CertificateChain.DisplayPath()})
		return nil
	}
	for i := range c.Certificates {
		if err := add(fmt.Sprintf("%s.tls_certificates[%d]", path, i), &c.Certificates[i]); err != nil {
			return nil, err
		}
	}
	for i, name := range c.CertificateSecrets {
		p := fmt.Sprintf("%s.tls_certificate_sds_secret_configs[%d]", path, i)
		s, err := deps.secret(p, name, "tls_certificate", func(s Secret) bool { return s.Certificate != nil })
		if err != nil {
			return nil, err
		}
		if err := add(fmt.Sprintf("%s (secret %q).tls_certificate", p, name), s.Certificate); err != nil {
			return nil, err
		}
	}
	vpath := path + ".validation_context"
	v := c.Validation
	if c.ValidationSecret != "" {
		p := path + ".validation_context_sds_secret_config"
		if c.Validation != nil {
			p = path + ".combined_validation_context.validation_context_sds_secret_config"
		}
		s, err := deps.secret(p, c.ValidationSecret, "validation_context", func(s Secret) bool { return s.Validation != nil })
		if err != nil {
			return nil, err
		}
		merged := *s.Validation
		if c.Validation != nil {
			merged = c.Validation.merge(*s.Validation)
		}
		v, vpath = &merged, fmt.Sprintf("%s (secret %q).validation_context", p, c.ValidationSecret)
	}
	if v != nil {
		if err := v.check(vpath); err != nil {
			return nil, err
		}
		var err error
		if m.verify, m.ca, err = loadVerifier(vpath, v, deps, usage); err != nil {
			return nil, err
		}
		m.validation = v
	}
	return m, nil
}

// loadCertificate reads and pairs one certificate chain and private key.
func loadCertificate(path string, cc *CertificateConfig, deps *Deps) (tls.Certificate, error) {
	var out tls.Certificate
	chainPEM, err := cc.CertificateChain.read(path+".certificate_chain", deps)
	if err != nil {
		return out, err
	}
	certs, err := parseCertificates(path+".certificate_chain", chainPEM)
	if err != nil {
		return out, err
	}
	keyPEM, err := cc.PrivateKey.read(path+".private_key", deps)
	if err != nil {
		return out, err
	}
	key, err := parsePrivateKey(path+".private_key", keyPEM)
	if err != nil {
		return out, err
	}
	pub, ok := certs[0].PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return out, fmt.Errorf("%s.private_key: does not match the public key of the certificate_chain's first certificate (serial %s)", path, serialHex(certs[0]))
	}
	for _, c := range certs {
		out.Certificate = append(out.Certificate, c.Raw)
	}
	out.PrivateKey, out.Leaf = key, certs[0]
	if cc.OCSPStaple.IsSet() {
		if out.OCSPStaple, err = cc.OCSPStaple.read(path+".ocsp_staple", deps); err != nil {
			return out, err
		}
	}
	for i := range cc.SignedCertificateTimestamps {
		sct, err := cc.SignedCertificateTimestamps[i].read(fmt.Sprintf("%s.signed_certificate_timestamp[%d]", path, i), deps)
		if err != nil {
			return out, err
		}
		out.SignedCertificateTimestamps = append(out.SignedCertificateTimestamps, sct)
	}
	return out, nil
}

// parseCertificates returns every CERTIFICATE block of data, in order.
func parseCertificates(path string, data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for n := 0; ; n++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: PEM block %d: %w", path, n, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no PEM CERTIFICATE block found", path)
	}
	return out, nil
}

// parsePrivateKey reads the first private key block: PKCS#8, PKCS#1 RSA or
// SEC 1 EC.
func parsePrivateKey(path string, data []byte) (crypto.Signer, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, fmt.Errorf("%s: no PEM private key block found", path)
		}
		var key any
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, fmt.Errorf("%s: encrypted private keys are not supported", path)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s block: %w", path, b.Type, err)
		}
		switch k := key.(type) {
		case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
			return k.(crypto.Signer), nil
		}
		return nil, fmt.Errorf("%s: key type %T is not supported; must be RSA, ECDSA or Ed25519", path, key)
	}
}

// parseCRLs returns every X509 CRL block of data.
func parseCRLs(path string, data []byte) ([]*x509.RevocationList, error) {
	var out []*x509.RevocationList
	for n := 0; ; n++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "X509 CRL" {
			continue
		}
		l, err := x509.ParseRevocationList(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: PEM block %d: %w", path, n, err)
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no PEM X509 CRL block found", path)
	}
	return out, nil
}

// readTicketKeys reads session ticket keys; each must be 80 bytes as in Envoy.
// Go takes 32-byte keys, so each is the SHA-256 of the configured key.
func readTicketKeys(path string, keys []DataSource, deps *Deps) ([][32]byte, error) {
	out := make([][32]byte, 0, len(keys))
	for i := range keys {
		p := fmt.Sprintf("%s.keys[%d]", path, i)
		b, err := keys[i].read(p, deps)
		if err != nil {
			return nil, err
		}
		if len(b) != 80 {
			return nil, fmt.Errorf("%s: key is %d bytes; must be 80", p, len(b))
		}
		out = append(out, ticketKey(b))
	}
	return out, nil
}
