package tlsutil

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/legateproxy/legate/internal/headermatch"
)

// Sentinel errors a failed peer verification wraps; they match Envoy's
// ssl.fail_verify_* counters. A handshake that fails in verification
// returns an error that errors.Is one of them.
var (
	// ErrVerifyChain: the chain does not lead to trusted_ca, is expired or
	// revoked, or is too deep (ssl.fail_verify_error).
	ErrVerifyChain = errors.New("peer certificate chain verification failed")
	// ErrVerifySAN: no subject alt name matched (ssl.fail_verify_san).
	ErrVerifySAN = errors.New("peer certificate subject alt names did not match")
	// ErrVerifyHash: neither the certificate hash nor the SPKI pin matched
	// (ssl.fail_verify_cert_hash).
	ErrVerifyHash = errors.New("peer certificate hash did not match")
	// ErrNoSNI: require_sni is set and the client sent no server name.
	ErrNoSNI = errors.New("client sent no server name (require_sni)")
)

// defaultVerifyDepth is BoringSSL's default chain depth limit.
const defaultVerifyDepth = 100

// verifier checks a peer's chain the way Envoy's default certificate
// validator does. It is immutable.
type verifier struct {
	roots           *x509.CertPool // nil: no chain verification
	rootCerts       []*x509.Certificate
	crls            []*x509.RevocationList
	onlyLeafCRL     bool
	sans            []SANMatcher
	hashes, spkis   [][]byte
	allowExpired    bool
	acceptUntrusted bool
	maxDepth        int
	usage           x509.ExtKeyUsage
	now             func() time.Time
}

// loadVerifier reads trusted_ca and crl. It returns a nil verifier when
// nothing is to be checked (no CA, no pins).
func loadVerifier(path string, v *ValidationConfig, deps *Deps, usage x509.ExtKeyUsage) (*verifier, *loadedCert, error) {
	vf := &verifier{
		sans:            v.SANMatchers,
		hashes:          v.CertificateHashes,
		spkis:           v.CertificateSPKIs,
		allowExpired:    v.AllowExpiredCertificate,
		acceptUntrusted: v.AcceptUntrusted,
		onlyLeafCRL:     v.OnlyVerifyLeafCertCRL,
		maxDepth:        defaultVerifyDepth,
		usage:           usage,
		now:             deps.now,
	}
	if v.MaxVerifyDepthSet {
		vf.maxDepth = v.MaxVerifyDepth
	}
	var ca *loadedCert
	if v.TrustedCA.IsSet() {
		data, err := v.TrustedCA.read(path+".trusted_ca", deps)
		if err != nil {
			return nil, nil, err
		}
		certs, err := parseCertificates(path+".trusted_ca", data)
		if err != nil {
			return nil, nil, err
		}
		vf.roots, vf.rootCerts = x509.NewCertPool(), certs
		for _, c := range certs {
			vf.roots.AddCert(c)
		}
		ca = &loadedCert{cert: certs[0], path: v.TrustedCA.DisplayPath()}
	}
	if v.CRL.IsSet() {
		data, err := v.CRL.read(path+".crl", deps)
		if err != nil {
			return nil, nil, err
		}
		if vf.crls, err = parseCRLs(path+".crl", data); err != nil {
			return nil, nil, err
		}
	}
	if vf.roots == nil && len(vf.hashes) == 0 && len(vf.spkis) == 0 {
		return nil, ca, nil
	}
	return vf, ca, nil
}

// verify checks the peer chain (leaf first). sni, when not empty, replaces
// the SAN matchers with a match on it (auto_sni_san_validation).
func (v *verifier) verify(peer []*x509.Certificate, sni string) error {
	sans := v.sans
	if sni != "" {
		sans = nameSANs(sni)
	}
	return v.check(peer, sans)
}

// nameSANs matches a certificate carrying name: as an IP address SAN when name is an IP
// address, else as a DNS SAN (whose wildcards apply), as Envoy compares a SAN list override.
func nameSANs(name string) []SANMatcher {
	if _, err := netip.ParseAddr(name); err == nil {
		return []SANMatcher{{Type: SANIP, Match: headermatch.ExactString(name)}}
	}
	return []SANMatcher{{Type: SANDNS, Match: headermatch.ExactString(name)}}
}

// check verifies the chain when there are roots, then that a SAN matches sans (none: any),
// then the pins.
func (v *verifier) check(peer []*x509.Certificate, sans []SANMatcher) error {
	if len(peer) == 0 {
		return fmt.Errorf("%w: no peer certificate", ErrVerifyChain)
	}
	leaf := peer[0]
	if v.roots != nil {
		if err := v.verifyChain(peer); err != nil && !v.acceptUntrusted {
			return err
		}
	}
	if len(sans) > 0 && !matchSANs(sans, leaf) {
		return fmt.Errorf("%w: certificate serial %s", ErrVerifySAN, serialHex(leaf))
	}
	if len(v.hashes) > 0 || len(v.spkis) > 0 {
		h, s := sha256.Sum256(leaf.Raw), sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
		if !containsDigest(v.hashes, h[:]) && !containsDigest(v.spkis, s[:]) {
			return fmt.Errorf("%w: certificate serial %s", ErrVerifyHash, serialHex(leaf))
		}
	}
	return nil
}

func (v *verifier) verifyChain(peer []*x509.Certificate) error {
	leaf := peer[0]
	opts := x509.VerifyOptions{
		Roots:         v.roots,
		Intermediates: x509.NewCertPool(),
		CurrentTime:   v.now(),
		KeyUsages:     []x509.ExtKeyUsage{v.usage},
	}
	for _, c := range peer[1:] {
		opts.Intermediates.AddCert(c)
	}
	chains, err := leaf.Verify(opts)
	if err != nil && v.allowExpired {
		// allow_expired_certificate: BoringSSL's callback ignores only
		// validity-period errors; Go cannot, so build the chain by
		// signatures alone.
		if chain, ok := v.chainIgnoringTime(peer); ok {
			chains, err = [][]*x509.Certificate{chain}, nil
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrVerifyChain, err)
	}
	var last error
	for _, chain := range chains {
		if len(chain)-1 > v.maxDepth {
			last = fmt.Errorf("%w: chain of %d certificates above the leaf exceeds max_verify_depth %d", ErrVerifyChain, len(chain)-1, v.maxDepth)
			continue
		}
		if last = v.checkRevocation(chain, opts.CurrentTime); last == nil {
			return nil
		}
	}
	return last
}

// chainIgnoringTime links peer[0] to a trusted certificate through
// signatures, using the peer's other certificates as intermediates, without
// looking at validity periods.
func (v *verifier) chainIgnoringTime(peer []*x509.Certificate) ([]*x509.Certificate, bool) {
	chain := []*x509.Certificate{peer[0]}
	for len(chain) <= v.maxDepth+1 {
		cur := chain[len(chain)-1]
		for _, r := range v.rootCerts {
			if bytes.Equal(cur.Raw, r.Raw) {
				return chain, true
			}
			if cur.CheckSignatureFrom(r) == nil {
				return append(chain, r), true
			}
		}
		next := -1
		for i, c := range peer[1:] {
			if !slices.Contains(chain, c) && cur.CheckSignatureFrom(c) == nil {
				next = i + 1
				break
			}
		}
		if next < 0 {
			return nil, false
		}
		chain = append(chain, peer[next])
	}
	return nil, false
}

// checkRevocation applies the CRLs to a verified chain (leaf first, trust
// anchor last): every certificate, or only the leaf, must have a CRL from
// its issuer that does not list it.
func (v *verifier) checkRevocation(chain []*x509.Certificate, now time.Time) error {
	if len(v.crls) == 0 {
		return nil
	}
	n := len(chain)
	if v.onlyLeafCRL {
		n = 1
	}
	for i := 0; i < n; i++ {
		c := chain[i]
		issuer := c
		if i+1 < len(chain) {
			issuer = chain[i+1]
		}
		crl := v.crlFor(issuer)
		if crl == nil {
			return fmt.Errorf("%w: no CRL from issuer %q of certificate serial %s", ErrVerifyChain, c.Issuer, serialHex(c))
		}
		if !crl.NextUpdate.IsZero() && now.After(crl.NextUpdate) {
			return fmt.Errorf("%w: CRL of issuer %q expired at %s", ErrVerifyChain, c.Issuer, crl.NextUpdate.UTC().Format(time.RFC3339))
		}
		for _, r := range crl.RevokedCertificateEntries {
			if r.SerialNumber.Cmp(c.SerialNumber) == 0 {
				return fmt.Errorf("%w: certificate serial %s is revoked", ErrVerifyChain, serialHex(c))
			}
		}
	}
	return nil
}

// crlFor returns a CRL issued and signed by issuer.
func (v *verifier) crlFor(issuer *x509.Certificate) *x509.RevocationList {
	for _, l := range v.crls {
		if bytes.Equal(l.RawIssuer, issuer.RawSubject) && l.CheckSignatureFrom(issuer) == nil {
			return l
		}
	}
	return nil
}

func matchSANs(ms []SANMatcher, leaf *x509.Certificate) bool {
	sans := certificateSANs(leaf)
	for i := range ms {
		for _, s := range sans.of(ms[i].Type) {
			if ms[i].match(s) {
				return true
			}
		}
	}
	return false
}

func containsDigest(list [][]byte, d []byte) bool {
	for _, x := range list {
		if bytes.Equal(x, d) {
			return true
		}
	}
	return false
}
