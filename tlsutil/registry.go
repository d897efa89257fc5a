package tlsutil

import (
	"crypto/x509"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/internal/clock"
)

// Registry is the set of live TLS contexts, client and server, in creation
// order: Envoy's SSL context manager as far as /certs and
// server.days_until_first_cert_expiring see it. A context joins when it is
// built with Deps.Registry and leaves on Close. Safe for concurrent use;
// the zero value is not usable, call NewRegistry.
type Registry struct {
	now func() time.Time
	// reloads counts Reload calls: a context built while one ran reloads once it has joined
	// (see newState), or it would keep material loaded before the change Reload announced.
	reloads atomic.Uint64

	mu       sync.Mutex // guards contexts
	contexts []*state
}

// NewRegistry returns an empty registry; now is the clock for days until
// expiration (nil is the system clock).
func NewRegistry(now func() time.Time) *Registry {
	if now == nil {
		now = clock.Real().Now
	}
	return &Registry{now: now}
}

func (r *Registry) add(s *state) {
	r.mu.Lock()
	r.contexts = append(r.contexts, s)
	r.mu.Unlock()
}

func (r *Registry) remove(s *state) {
	r.mu.Lock()
	r.contexts = slices.DeleteFunc(r.contexts, func(x *state) bool { return x == s })
	r.mu.Unlock()
}

func (r *Registry) snapshot() []*state {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.contexts)
}

// CertificateDetails is one certificate as /certs shows it (Envoy's
// admin.v3.CertificateDetails without OCSP details).
type CertificateDetails struct {
	// Path is the data source's file name, or "<inline>".
	Path string
	// SerialNumber is lowercase hex, leading zero bytes dropped, every byte
	// two digits (BoringSSL's BN_bn2hex).
	SerialNumber string
	// SANs lists DNS names, then URIs, then IP addresses.
	SANs []SAN
	// DaysUntilExpiration is whole days left; 0 once expired.
	DaysUntilExpiration uint64
	ValidFrom           time.Time
	ExpirationTime      time.Time
}

// SAN is one subject alternative name: Type is SANDNS, SANURI or SANIP.
type SAN struct {
	Type  SANType
	Value string
}

// ContextCertificates are one context's certificates: the validation CA
// (zero or one entry) and each configured certificate's leaf.
type ContextCertificates struct {
	CA    []CertificateDetails
	Chain []CertificateDetails
}

// Certificates returns every context's certificates in creation order.
func (r *Registry) Certificates() []ContextCertificates {
	now := r.now()
	ctxs := r.snapshot()
	out := make([]ContextCertificates, 0, len(ctxs))
	for _, s := range ctxs {
		m := s.cur.Load()
		cc := ContextCertificates{CA: []CertificateDetails{}, Chain: []CertificateDetails{}}
		if m.ca != nil {
			cc.CA = append(cc.CA, details(m.ca, now))
		}
		for i := range m.chain {
			cc.Chain = append(cc.Chain, details(&m.chain[i], now))
		}
		out = append(out, cc)
	}
	return out
}

// DaysUntilFirstCertExpiring is the value of the
// server.days_until_first_cert_expiring gauge: the fewest whole days left
// on any CA or chain certificate of any context, 0 when one has expired,
// and 4294967295 when there are no certificates (as in Envoy). The server
// calls it before each stats flush.
func (r *Registry) DaysUntilFirstCertExpiring() uint64 {
	now := r.now()
	least := uint64(math.MaxUint32)
	for _, s := range r.snapshot() {
		m := s.cur.Load()
		certs := m.chain
		if m.ca != nil {
			certs = append([]loadedCert{*m.ca}, certs...)
		}
		for i := range certs {
			d, ok := daysUntil(certs[i].cert.NotAfter, now)
			if !ok {
				return 0
			}
			least = min(least, d)
		}
	}
	return least
}

// Reload re-reads every context's files and secrets (see
// ClientContext.Reload). Contexts that fail keep their current state; the
// errors are joined.
func (r *Registry) Reload() error {
	r.reloads.Add(1)
	var errs []error
	for _, s := range r.snapshot() {
		if err := s.reload(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// daysUntil is whole days from now to t, false when t is in the past.
func daysUntil(t, now time.Time) (uint64, bool) {
	secs := t.Unix() - now.Unix()
	if secs < 0 {
		return 0, false
	}
	return uint64(secs / 86400), true
}

func details(lc *loadedCert, now time.Time) CertificateDetails {
	c := lc.cert
	days, _ := daysUntil(c.NotAfter, now)
	d := CertificateDetails{
		Path:                lc.path,
		SerialNumber:        serialHex(c),
		SANs:                []SAN{},
		DaysUntilExpiration: days,
		ValidFrom:           c.NotBefore.UTC(),
		ExpirationTime:      c.NotAfter.UTC(),
	}
	sans := certificateSANs(c)
	for _, t := range []SANType{SANDNS, SANURI, SANIP} {
		for _, v := range sans.of(t) {
			d.SANs = append(d.SANs, SAN{Type: t, Value: v})
		}
	}
	return d
}

// serialHex prints a serial number as BoringSSL's BN_bn2hex does.
func serialHex(c *x509.Certificate) string {
	n := c.SerialNumber
	if n == nil || n.Sign() == 0 {
		return "0"
	}
	s := hex.EncodeToString(n.Bytes())
	if n.Sign() < 0 {
		return "-" + s
	}
	return s
}
