package tlsutil

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/legateproxy/legate/stats"
)

// Stats are the ssl.* counters of one stats scope (Envoy's SSL_STATS in
// source/common/tls/stats.h): listener.<address>.ssl.* for downstream
// contexts, cluster.<name>.ssl.* for upstream ones. Every context of a scope
// shares one Stats, as every Envoy context of a scope shares its counters.
// A nil *Stats counts nothing. Safe for concurrent use; counting takes no
// lock except the first time a cipher, version or curve is seen.
//
// Not counted: ocsp_staple_* (Legate staples no OCSP responses),
// was_key_usage_invalid (crypto/tls enforces key usage) and ssl.sigalgs.*
// (crypto/tls does not report the peer's signature algorithm).
type Stats struct {
	ConnectionError     stats.Counter `stat:"connection_error"`
	Handshakes          stats.Counter `stat:"handshake"`
	SessionReused       stats.Counter `stat:"session_reused"`
	NoCertificate       stats.Counter `stat:"no_certificate"`
	FailVerifyNoCert    stats.Counter `stat:"fail_verify_no_cert"`
	FailVerifyError     stats.Counter `stat:"fail_verify_error"`
	FailVerifySAN       stats.Counter `stat:"fail_verify_san"`
	FailVerifyCertHash  stats.Counter `stat:"fail_verify_cert_hash"`
	OCSPStapleFailed    stats.Counter `stat:"ocsp_staple_failed"`
	OCSPStapleOmitted   stats.Counter `stat:"ocsp_staple_omitted"`
	OCSPStapleResponses stats.Counter `stat:"ocsp_staple_responses"`
	OCSPStapleRequests  stats.Counter `stat:"ocsp_staple_requests"`
	WasKeyUsageInvalid  stats.Counter `stat:"was_key_usage_invalid"`

	reg *stats.Registration // nil: detached (a zero Stats in tests)
	// dynamic holds the lazily made ssl.ciphers.*, ssl.versions.* and
	// ssl.curves.* counters: dynamicKey -> *stats.Counter.
	dynamic sync.Map
	refs    int // guarded by StatsScopes.mu
}

// dynamicKey names one lazily made counter without building its name.
type dynamicKey struct {
	family uint8 // familyCipher, familyVersion, familyCurve
	id     uint16
}

const (
	familyCipher uint8 = iota
	familyVersion
	familyCurve
)

var familyNames = [...]string{"ciphers.", "versions.", "curves."}

// counter returns the counter of one cipher, version or curve, made on
// first use under the scope (ssl.<family>.<name>).
func (st *Stats) counter(family uint8, id uint16, name string) *stats.Counter {
	k := dynamicKey{family, id}
	if c, ok := st.dynamic.Load(k); ok {
		return c.(*stats.Counter)
	}
	c := new(stats.Counter)
	if st.reg != nil {
		c = st.reg.Counter(familyNames[family] + name)
	}
	v, _ := st.dynamic.LoadOrStore(k, c)
	return v.(*stats.Counter)
}

// Succeeded counts a completed handshake as Envoy's logHandshake does:
// handshake, session_reused, ciphers.<name>, versions.<name>, curves.<name>
// (when a group was negotiated) and no_certificate when the peer presented
// none.
func (st *Stats) Succeeded(cs *tls.ConnectionState) {
	if st == nil {
		return
	}
	st.Handshakes.Inc()
	if cs.DidResume {
		st.SessionReused.Inc()
	}
	if n := CipherName(cs.CipherSuite); n != "" {
		st.counter(familyCipher, cs.CipherSuite, n).Inc()
	}
	if n := VersionName(cs.Version); n != "" {
		st.counter(familyVersion, cs.Version, n).Inc()
	}
	if n := CurveName(cs.CurveID); n != "" {
		st.counter(familyCurve, uint16(cs.CurveID), n).Inc()
	}
	if len(cs.PeerCertificates) == 0 {
		st.NoCertificate.Inc()
	}
}

// Failed counts a failed handshake as Envoy's SSL socket does: a peer
// verification failure in its fail_verify_* counter, a client that sent no
// certificate to a context requiring one in fail_verify_no_cert, a transport
// error (the peer closed or reset the connection, a timeout) in nothing, and
// any other TLS error in connection_error.
func (st *Stats) Failed(err error) {
	if st == nil || err == nil {
		return
	}
	switch {
	case errors.Is(err, ErrVerifyChain):
		st.FailVerifyError.Inc()
	case errors.Is(err, ErrVerifySAN):
		st.FailVerifySAN.Inc()
	case errors.Is(err, ErrVerifyHash):
		st.FailVerifyCertHash.Inc()
	case isNoClientCertificate(err):
		st.FailVerifyNoCert.Inc()
	case isTransportError(err):
	default:
		st.ConnectionError.Inc()
	}
}

// isNoClientCertificate reports crypto/tls's refusal of a client without a
// certificate under RequireAnyClientCert. crypto/tls has no sentinel for it,
// so its message is the only mark.
func isNoClientCertificate(err error) bool {
	return strings.HasSuffix(err.Error(), "client didn't provide a certificate")
}

// isTransportError reports errors of the connection under the handshake,
// which Envoy leaves out of connection_error: end of stream, resets and
// deadlines. crypto/tls reports an alert from the peer as a *net.OpError
// too, with Op "remote error" ("local error" for one it sent): those are
// TLS errors.
func isTransportError(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var ne *net.OpError
	return errors.As(err, &ne) && ne.Op != "remote error" && ne.Op != "local error"
}

// Handshake runs tc's handshake under ctx and counts the outcome; it returns
// the connection's state.
func (st *Stats) Handshake(ctx context.Context, tc *tls.Conn) (tls.ConnectionState, error) {
	if err := tc.HandshakeContext(ctx); err != nil {
		st.Failed(err)
		return tls.ConnectionState{}, err
	}
	cs := tc.ConnectionState()
	st.Succeeded(&cs)
	return cs, nil
}

// StatsScopes hands out the Stats of each scope prefix ("listener.
// 127.0.0.1_10000.", "cluster.web."), registered under prefix+"ssl." in one
// store and shared by every context of the scope until the last releases
// it. Safe for concurrent use; the zero value is not usable (NewStatsScopes).
type StatsScopes struct {
	store *stats.Store
	mu    sync.Mutex // guards byPrefix and every Stats.refs
	byPre map[string]*Stats
}

// NewStatsScopes returns scopes registering in store.
func NewStatsScopes(store *stats.Store) *StatsScopes {
	return &StatsScopes{store: store, byPre: map[string]*Stats{}}
}

// acquire returns the scope's Stats, registering them on first use; a nil
// receiver or an empty prefix gives nil (no counting).
func (s *StatsScopes) acquire(prefix string) *Stats {
	if s == nil || prefix == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byPre[prefix]
	if !ok {
		st = &Stats{}
		if s.store != nil {
			st.reg = s.store.Register(prefix+"ssl.", st)
		}
		s.byPre[prefix] = st
	}
	st.refs++
	return st
}

// release drops one reference to prefix's Stats, unregistering them with
// the last.
func (s *StatsScopes) release(prefix string, st *Stats) {
	if s == nil || st == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.refs--; st.refs > 0 {
		return
	}
	if st.reg != nil {
		st.reg.Unregister()
	}
	if s.byPre[prefix] == st {
		delete(s.byPre, prefix)
	}
}
