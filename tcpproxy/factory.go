package tcpproxy

import (
	"fmt"
	"sync"

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

// Register adds the envoy.filters.network.tcp_proxy handler factory (by name and by its
// typed_config type URL) to r.
func Register(r *listener.Registry, deps Deps) error {
	return r.Register(config.TCPProxyFilter, Factory(deps), config.TCPProxyTypeURL)
}

// Factory returns the listener.HandlerFactory of the TCP proxy. Filter chains with the same
// stat_prefix share one tcp.<stat_prefix>.* registration, as Envoy's stats scopes do; it is
// removed when the last of them closes.
func Factory(deps Deps) listener.HandlerFactory {
	t := &statsTable{entries: map[string]*statsEntry{}}
	return func(ctx *listener.ChainContext) (listener.FilterChainHandler, error) {
		filters := ctx.Chain.Filters
		if len(filters) == 0 {
			return nil, fmt.Errorf("filter chain %q has no network filter", ctx.Chain.Name)
		}
		f := filters[len(filters)-1]
		cfg, err := config.TCPProxyFromAny(f.TypedConfig)
		if err != nil {
			return nil, fmt.Errorf("filter %q: %w", f.Name, err)
		}
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
