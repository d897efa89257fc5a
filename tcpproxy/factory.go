package tcpproxy

import (
	"sync"

	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/overload"
	"github.com/legateproxy/legate/pool"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil"
)

// Deps are the server-wide dependencies of every TCP proxy.
type Deps struct {
	// Pools gives each cluster's connection pools. Required.
	Pools *pool.Registry
	// AccessLogs builds access_log entries; the zero value refuses them.
	AccessLogs AccessLogDeps
	// TLS are the dependencies of filter chains' DownstreamTlsContext (secrets, the /certs
	// registry, which reloads the contexts when secrets rotate, and the ssl.* stats scopes:
	// each context counts in its listener's scope); the zero value loads only inline and
	// file data sources and counts nothing.
	TLS tlsutil.Deps
	// Overload is the overload manager's state; nil for none. Listeners with
	// bypass_overload_manager do without it.
	Overload *overload.State
	// Sockets holds the downstream transport sockets (tlsutil.DownstreamSockets) a filter
	// chain may have; nil means tlsutil's.
	Sockets *registry.Registry
}

// Register registers the TCP proxy's factory (listener.TerminalFilters) with the extension
// registry; package config registers how its typed_config converts (a *config.TCPProxy).
// The factory serves with the *Service the server gives the listener manager
// (listener.ManagerConfig.Services) under config.TCPProxyFilter.
func Register(b *registry.Builder) {
	registry.Add(b, listener.TerminalFilters, config.TCPProxyFilter, &tcpproxyv3.TcpProxy{}, build)
}

// build is the TCP proxy's listener.HandlerFactory.
func build(ctx *listener.ChainContext, cfg any) (listener.FilterChainHandler, error) {
	s, err := listener.Service[*Service](ctx.Services, config.TCPProxyFilter)
	if err != nil {
		return nil, err
	}
	return s.Handler(ctx, cfg)
}

// Service is what the TCP proxies of one server share: their Deps, and the stats
// registrations of their stat prefixes (filter chains with the same stat_prefix share one
// tcp.<stat_prefix>.* registration, as Envoy's stats scopes do; it is removed when the last
// of them closes). Safe for concurrent use.
type Service struct {
	deps  Deps
	stats *statsTable
}

// NewService returns the service of the TCP proxies built with deps.
func NewService(deps Deps) *Service {
	return &Service{deps: deps, stats: &statsTable{entries: map[string]*statsEntry{}}}
}

// Handler builds the TCP proxy of one filter chain from its converted configuration, a
// *config.TCPProxy.
func (s *Service) Handler(ctx *listener.ChainContext, decoded any) (listener.FilterChainHandler, error) {
	cfg, err := listener.ConfigOf[*config.TCPProxy](config.TCPProxyFilter, decoded)
	if err != nil {
		return nil, err
	}
	deps, t := s.deps, s.stats
	tlsDeps := deps.TLS
	tlsDeps.StatPrefix = ctx.StatPrefix // listener.<address>.ssl.*
	sc, err := downstreamTLS(deps.Sockets, ctx.Chain, tlsDeps)
	if err != nil {
		return nil, err
	}
	ov := deps.Overload
	if ctx.Listener != nil && ctx.Listener.BypassOverloadManager {
		ov = nil
	}
	st := t.acquire(ctx.Stats, cfg.StatPrefix)
	p, err := New(Config{Proxy: cfg, Pools: deps.Pools, Stats: st.stats, Logger: ctx.Logger, AccessLogs: deps.AccessLogs,
		TLS: sc, HandshakeTimeout: handshakeTimeout(ctx.Chain, cfg.IdleTimeout), Overload: ov})
	if err != nil {
		t.release(cfg.StatPrefix)
		if sc != nil {
			sc.Close()
		}
		return nil, err
	}
	return &handler{Proxy: p, release: func() {
		t.release(cfg.StatPrefix)
		if sc != nil {
			sc.Close()
		}
	}}, nil
}

// handler is a Proxy that gives back its stats when its filter chain is removed.
type handler struct {
	*Proxy
	once    sync.Once
	release func()
}

// Close implements io.Closer for the listener manager.
func (h *handler) Close() error {
	h.once.Do(h.release)
	return nil
}

// statsTable shares stats registrations by prefix. mu guards entries.
type statsTable struct {
	mu      sync.Mutex
	entries map[string]*statsEntry
}

type statsEntry struct {
	stats *Stats
	reg   *stats.Registration
	refs  int
}

func (t *statsTable) acquire(store *stats.Store, prefix string) *statsEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[prefix]
	if e == nil {
		e = &statsEntry{stats: &Stats{}}
		if store != nil {
			e.reg = store.Register("tcp."+prefix+".", e.stats)
		}
		t.entries[prefix] = e
	}
	e.refs++
	return e
}

func (t *statsTable) release(prefix string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[prefix]
	if e == nil {
		return
	}
	if e.refs--; e.refs == 0 {
		if e.reg != nil {
			e.reg.Unregister()
		}
		delete(t.entries, prefix)
	}
}
