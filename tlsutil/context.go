package tlsutil

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// state is what client and server contexts share: the current material,
// how to load a new one, and the registry entry.
type state struct {
	load   func() (*material, error)
	reg    *Registry
	scopes *StatsScopes
	prefix string
	stats  *Stats // nil: not counted; set once in newState
	closed atomic.Bool

	mu  sync.Mutex // serialises reload so loads publish in call order
	cur atomic.Pointer[material]
}

func newState(deps *Deps, load func() (*material, error)) (*state, error) {
	s := &state{load: load, reg: deps.Registry}
	var reloads uint64
	if s.reg != nil {
		reloads = s.reg.reloads.Load()
	}
	m, err := load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(m)
	if s.reg != nil {
		s.reg.add(s)
		if s.reg.reloads.Load() != reloads {
			// A secret changed while this loaded, and that Reload did not see this context.
			// A failed load keeps the current material, as Reload does for every context.
			_ = s.reload()
		}
	}
	s.scopes, s.prefix = deps.Stats, deps.StatPrefix
	s.stats = s.scopes.acquire(s.prefix)
	return s, nil
}

// reload builds new material and publishes it; on error the current
// material stays.
func (s *state) reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.load()
	if err != nil {
		return err
	}
	s.cur.Store(m)
	return nil
}

func (s *state) close() {
	if s.reg != nil {
		s.reg.remove(s)
	}
	if !s.closed.Swap(true) {
		s.scopes.release(s.prefix, s.stats)
	}
}

// ClientContext is a live UpstreamTlsContext: the *tls.Config the upstream
// pools dial with. Safe for concurrent use.
//
// Each load (NewClientContext, then every successful Reload) has its own
// *tls.Config, session cache and callbacks, all bound to that load's
// certificates: a handshake, and the session ticket that arrives after a
// TLS 1.3 handshake, stay with the load the connection started with, so a
// session made with a replaced client certificate is never resumed.
//
// Peer verification happens only when the validation context has a
// trusted_ca (or certificate pins), as the spec requires; otherwise any
// server certificate is accepted.
type ClientContext struct {
	cfg UpstreamConfig
	st  *state
}

// clientLoad is the client half of a material: the configuration its
// handshakes use and, with auto_host_sni, one copy per host name.
type clientLoad struct {
	config *tls.Config
	hosts  sync.Map // host name -> *tls.Config, sharing config's session cache
	// authorities holds ConfigForAuthority's configurations, at most maxAuthorityConfigs:
	// their names come from requests, so a client sending many names costs a configuration
	// per connection rather than memory for good.
	authorities sync.Map // authorityKey -> *tls.Config, sharing config's session cache
	nAuthority  atomic.Int32
}

// maxAuthorityConfigs bounds the configurations a load keeps for request authorities.
const maxAuthorityConfigs = 1024

// authorityKey names one of ConfigForAuthority's configurations.
type authorityKey struct {
	name     string
	sni, san bool
}

// NewClientContext loads cfg's certificates and secrets and returns the
// context, registered in deps.Registry when that is set.
func NewClientContext(cfg UpstreamConfig, deps Deps) (*ClientContext, error) {
	st, err := newState(&deps, func() (*material, error) {
		m, err := loadCommon(cfg.Path+".common_tls_context", &cfg.Common, &deps, x509.ExtKeyUsageServerAuth)
		if err != nil {
			return nil, err
		}
		m.client = &clientLoad{config: clientConfig(&cfg, m)}
		return m, nil
	})
	if err != nil {
		return nil, err
	}
	return &ClientContext{cfg: cfg, st: st}, nil
}

// clientConfig builds the configuration for handshakes with m's
// certificates; its callbacks and session cache belong to m alone.
func clientConfig(cfg *UpstreamConfig, m *material) *tls.Config {
	p := &cfg.Common.Params
	c := &tls.Config{
		ServerName:       cfg.SNI,
		NextProtos:       cfg.Common.ALPN,
		MinVersion:       p.MinVersion,
		MaxVersion:       p.MaxVersion,
		CipherSuites:     p.CipherSuites,
		CurvePreferences: p.Curves,
		// Go's own verification would also check the host name, which
		// Envoy never does; VerifyConnection does Envoy's checks.
		InsecureSkipVerify: true,
		// Full records from the start, as on the server side (loadServer).
		DynamicRecordSizingDisabled: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if len(m.certs) == 0 {
				return &tls.Certificate{}, nil // send none
			}
			return &m.certs[0], nil
		},
	}
	if v := m.verify; v != nil {
		sanSNI := cfg.AutoSNISANValidation
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			sni := ""
			if sanSNI {
				sni = cs.ServerName
			}
			return v.verify(cs.PeerCertificates, sni)
		}
	}
	if cfg.MaxSessionKeys > 0 {
		c.ClientSessionCache = tls.NewLRUClientSessionCache(cfg.MaxSessionKeys)
	}
	return c
}

// Config returns the configuration for a new connection. It is shared:
// Clone it before changing anything. It is bound to the certificates loaded
// when it was returned, so call Config for each connection: after Reload
// it returns a new configuration (with an empty session cache).
func (c *ClientContext) Config() *tls.Config { return c.st.cur.Load().client.config }

// ConfigForHost returns the configuration for a new connection to host:
// with auto_host_sni the host name is the SNI (and, with
// auto_sni_san_validation, what the server's DNS SAN must match);
// otherwise it is Config(). Like Config, call it for each connection.
func (c *ClientContext) ConfigForHost(host string) *tls.Config {
	if !c.cfg.AutoHostSNI {
		return c.Config()
	}
	return c.configForServerName(host)
}

// configForServerName returns the configuration for a new connection that sends name as SNI;
// with auto_sni_san_validation the server's DNS SAN must match it. An empty name is Config().
func (c *ClientContext) configForServerName(host string) *tls.Config {
	l := c.st.cur.Load().client
	if host == "" {
		return l.config
	}
	if v, ok := l.hosts.Load(host); ok {
		return v.(*tls.Config)
	}
	cfg := l.config.Clone()
	cfg.ServerName = host
	v, _ := l.hosts.LoadOrStore(host, cfg)
	return v.(*tls.Config)
}

// ConfigForAuthority returns the configuration for a new connection carrying requests whose
// authority's host is name (the cluster's upstream_http_protocol_options): with sni
// (auto_sni) name is the SNI, unless it is an IP address; with san (auto_san_validation) the
// server must present a certificate carrying name as a SAN (DNS, wildcards allowed, or IP
// address), which replaces the validation context's SAN matchers and is checked even without
// one. The chain is checked only against a trusted_ca, as for every upstream. An empty name is
// Config(). Like Config, call it for each connection.
func (c *ClientContext) ConfigForAuthority(name string, sni, san bool) *tls.Config {
	m := c.st.cur.Load()
	l := m.client
	if name == "" || (!sni && !san) {
		return l.config
	}
	key := authorityKey{name: name, sni: sni, san: san}
	if v, ok := l.authorities.Load(key); ok {
		return v.(*tls.Config)
	}
	cfg := l.config.Clone()
	if _, err := netip.ParseAddr(name); err != nil && sni {
		cfg.ServerName = name
	}
	if san {
		v := m.verify
		if v == nil {
			v = &verifier{} // no chain, no pins: the name alone
		}
		sans := nameSANs(name)
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			return v.check(cs.PeerCertificates, sans)
		}
	}
	if l.nAuthority.Add(1) > maxAuthorityConfigs {
		l.nAuthority.Add(-1)
		return cfg
	}
	v, loaded := l.authorities.LoadOrStore(key, cfg)
	if loaded {
		l.nAuthority.Add(-1)
	}
	return v.(*tls.Config)
}

// Reload re-reads the context's files and secrets and, if they load, makes
// them the ones new handshakes use. Established connections, and handshakes
// already started, keep the certificates they began with. On error the
// previous certificates stay in use.
func (c *ClientContext) Reload() error { return c.st.reload() }

// Close removes the context from its registry (/certs) and releases its
// ssl.* stats.
func (c *ClientContext) Close() { c.st.close() }

// Stats returns the ssl.* stats the context's handshakes count in (nil when
// Deps.Stats was not set). The caller runs the handshake, so it counts:
// Stats.Handshake or Stats.Succeeded and Stats.Failed.
func (c *ClientContext) Stats() *Stats { return c.st.stats }

// ServerContext is a live DownstreamTlsContext: the *tls.Config a listener
// accepts with. Safe for concurrent use.
type ServerContext struct {
	cfg  DownstreamConfig
	st   *state
	base *tls.Config
}

// NewServerContext loads cfg's certificates, validation context and session
// ticket keys and returns the context, registered in deps.Registry when that
// is set.
func NewServerContext(cfg DownstreamConfig, deps Deps) (*ServerContext, error) {
	s := &ServerContext{cfg: cfg}
	st, err := newState(&deps, func() (*material, error) { return loadServer(&cfg, &deps) })
	if err != nil {
		return nil, err
	}
	s.st = st
	s.base = &tls.Config{
		GetConfigForClient: s.configForClient,
		// For callers such as http.Server.ServeTLS that insist on a
		// certificate source in the outer config.
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.st.cur.Load().handshake.GetCertificate(h)
		},
	}
	return s, nil
}

// Config returns the listener configuration. It is shared and must not be
// changed; GetConfigForClient hands each handshake the current state.
func (s *ServerContext) Config() *tls.Config { return s.base }

// Reload re-reads files and secrets; see ClientContext.Reload.
func (s *ServerContext) Reload() error { return s.st.reload() }

// Close removes the context from its registry (/certs) and releases its
// ssl.* stats; handshakes after it are counted in detached stats.
func (s *ServerContext) Close() { s.st.close() }

// Stats returns the ssl.* stats the context's handshakes count in (nil when
// Deps.Stats was not set).
func (s *ServerContext) Stats() *Stats { return s.st.stats }

// Accept runs the server handshake on conn with the context's configuration
// and counts it in the context's ssl.* stats. A non-zero deadline bounds the
// handshake (and is cleared after it). With recordLocal it also returns the
// leaf of the certificate the proxy presented (nil on a resumed session,
// which presents none), for the access log's %DOWNSTREAM_LOCAL_*%; that
// costs a configuration copy per handshake, so ask only when it is printed.
func (s *ServerContext) Accept(conn net.Conn, deadline time.Time, recordLocal bool) (*tls.Conn, tls.ConnectionState, *x509.Certificate, error) {
	cfg := s.base
	var local *x509.Certificate // written by the handshake, on this goroutine
	if recordLocal {
		cfg = &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := s.configForClient(h)
			if err != nil || c == nil {
				return c, err
			}
			c = c.Clone() // keeps the load's session ticket keys
			get := c.GetCertificate
			c.GetCertificate = func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
				cert, err := get(h)
				if cert != nil {
					local = leafOf(cert)
				}
				return cert, err
			}
			return c, nil
		}}
	}
	tc := tls.Server(conn, cfg)
	if !deadline.IsZero() {
		conn.SetDeadline(deadline)
	}
	cs, err := s.st.stats.Handshake(context.Background(), tc)
	if err != nil {
		return nil, cs, nil, err
	}
	if !deadline.IsZero() {
		conn.SetDeadline(time.Time{})
	}
	return tc, cs, local, nil
}

// leafOf returns the parsed leaf of a certificate; nil if it does not parse.
func leafOf(c *tls.Certificate) *x509.Certificate {
	if c.Leaf != nil || len(c.Certificate) == 0 {
		return c.Leaf
	}
	l, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil
	}
	return l
}

func (s *ServerContext) configForClient(h *tls.ClientHelloInfo) (*tls.Config, error) {
	if s.cfg.RequireSNI && h.ServerName == "" {
		return nil, ErrNoSNI
	}
	return s.st.cur.Load().handshake, nil
}

func loadServer(cfg *DownstreamConfig, deps *Deps) (*material, error) {
	path := cfg.Path
	m, err := loadCommon(path+".common_tls_context", &cfg.Common, deps, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	if len(m.certs) == 0 {
		return nil, fmt.Errorf("%s.common_tls_context: no certificate loaded; a server context needs one", path)
	}
	p := &cfg.Common.Params
	h := &tls.Config{
		NextProtos:             cfg.Common.ALPN,
		MinVersion:             p.MinVersion,
		MaxVersion:             p.MaxVersion,
		CipherSuites:           p.CipherSuites,
		CurvePreferences:       p.Curves,
		SessionTicketsDisabled: cfg.DisableStatelessSessionResumption,
		GetCertificate:         selectCertificate(m.certs),
		// Records up to 16 KB from the start, as Envoy's BoringSSL and nginx write them.
		// Go's dynamic sizing begins each connection with ~1.2 KB records growing by that
		// much per record for its first 128 KB: one write of a 12 KB response was 4
		// records and 4 write calls, and every record paid for the size computation.
		DynamicRecordSizingDisabled: true,
	}
	switch {
	case cfg.RequireClientCertificate:
		h.ClientAuth = tls.RequireAnyClientCert
	case m.verify != nil:
		h.ClientAuth = tls.RequestClientCert
	}
	if v := m.verify; v != nil {
		if v.roots != nil && !m.validation.SuppressClientCAList {
			h.ClientCAs = v.roots
		}
		h.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return nil // not required, not sent
			}
			return v.verify(cs.PeerCertificates, "")
		}
	}
	keys, err := serverTicketKeys(cfg, deps)
	if err != nil {
		return nil, err
	}
	h.SetSessionTicketKeys(keys)
	m.handshake = h
	return m, nil
}

// serverTicketKeys returns the configured keys, or one random key: like an
// Envoy context, each load has its own, so tickets issued before a Reload
// do not resume with replaced certificates.
func serverTicketKeys(cfg *DownstreamConfig, deps *Deps) ([][32]byte, error) {
	switch {
	case len(cfg.SessionTicketKeys) > 0:
		return readTicketKeys(cfg.Path+".session_ticket_keys", cfg.SessionTicketKeys, deps)
	case cfg.SessionTicketKeysSecret != "":
		p := cfg.Path + ".session_ticket_keys_sds_secret_config"
		sec, err := deps.secret(p, cfg.SessionTicketKeysSecret, "session_ticket_keys", func(s Secret) bool { return len(s.SessionTicketKeys) > 0 })
		if err != nil {
			return nil, err
		}
		return readTicketKeys(fmt.Sprintf("%s (secret %q).session_ticket_keys", p, cfg.SessionTicketKeysSecret), sec.SessionTicketKeys, deps)
	}
	var k [32]byte
	rand.Read(k[:])
	return [][32]byte{k}, nil
}

func ticketKey(b []byte) [32]byte { return sha256.Sum256(b) }

// selectCertificate picks, as Envoy does, a certificate whose names cover
// the SNI and that the client can use, then any the client can use, then
// the first.
func selectCertificate(certs []tls.Certificate) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if len(certs) == 1 {
			return &certs[0], nil
		}
		if h.ServerName != "" {
			for i := range certs {
				if certs[i].Leaf.VerifyHostname(h.ServerName) == nil && h.SupportsCertificate(&certs[i]) == nil {
					return &certs[i], nil
				}
			}
		}
		for i := range certs {
			if h.SupportsCertificate(&certs[i]) == nil {
				return &certs[i], nil
			}
		}
		return &certs[0], nil
	}
}
