package udpproxy

import (
	"fmt"
	"sync"

	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/stats"
)

// Register registers the UDP proxy's parser (config.UDPListenerFilterConfigs, a *Config) and
// factory (listener.UDPFilters) with the extension registry. The factory serves with the
// *Service the server gives the listener manager (listener.ManagerConfig.Services) under
// config.UDPProxyFilter.
func Register(b *registry.Builder) {
	registry.Add(b, config.UDPListenerFilterConfigs, config.UDPProxyFilter, &udpproxyv3.UdpProxyConfig{}, parse)
	registry.Add(b, listener.UDPFilters, config.UDPProxyFilter, &udpproxyv3.UdpProxyConfig{}, build)
}

// Deps are the server-wide dependencies of every UDP proxy.
type Deps struct {
	// Clusters finds the upstream clusters. Required.
	Clusters Clusters
	// Clock times sessions; nil means the system clock.
	Clock clock.Clock
	// Files opens the files of envoy.access_loggers.file, stdout and stderr; nil refuses
	// access logs.
	Files *accesslog.Manager
	// Loggers are the access loggers' factories (accesslog.UDPLoggers); nil means the
	// accesslog package's own.
	Loggers *registry.Registry
	// Runtime reads access log filters' runtime_key overrides; nil uses their defaults.
	Runtime func(key string, def uint64) uint64
}

// build is the UDP proxy's listener.PacketHandlerFactory.
func build(ctx *listener.PacketContext, cfg any) (listener.PacketHandler, error) {
	s, err := listener.Service[*Service](ctx.Services, config.UDPProxyFilter)
	if err != nil {
		return nil, err
	}
	return s.Handler(ctx, cfg)
}

// Service is what the UDP proxies of one server share: their Deps, and the stats
// registrations (proxies with the same stat_prefix share udp.<stat_prefix>.*, and those of
// one cluster cluster.<name>.udp.*; a registration goes when its last proxy closes). Safe for
// concurrent use.
type Service struct {
	deps  Deps
	stats *statsTable
}

// NewService returns the service of the UDP proxies built with d.
func NewService(d Deps) *Service {
	return &Service{deps: d, stats: &statsTable{refs: map[string]*shared{}}}
}

// Handler builds the UDP proxy of one listener from its converted configuration, a *Config.
func (s *Service) Handler(ctx *listener.PacketContext, decoded any) (listener.PacketHandler, error) {
	cfg, err := listener.ConfigOf[*Config](config.UDPProxyFilter, decoded)
	if err != nil {
		return nil, err
	}
	d, t := s.deps, s.stats
	logs, err := buildLogs(cfg, d)
	if err != nil {
		return nil, err
	}
	st := t.acquire(ctx.Stats, "udp."+cfg.StatPrefix+".", func() any { return &Stats{} })
	cst := t.acquire(ctx.Stats, "cluster."+cfg.Cluster+".udp.", func() any { return &ClusterStats{} })
	p, err := New(cfg, Options{Clusters: d.Clusters, Clock: d.Clock, Stats: st.(*Stats), ClusterStats: cst.(*ClusterStats),
		Local: ctx.Listener.Address.String(), Logs: logs, Logger: ctx.Logger})
	if err != nil {
		return nil, err
	}
	return &handler{Proxy: p, release: func() {
		t.release("udp." + cfg.StatPrefix + ".")
		t.release("cluster." + cfg.Cluster + ".udp.")
	}}, nil
}

// handler is a Proxy that gives back its stats when it closes.
type handler struct {
	*Proxy
	once    sync.Once
	release func()
}

func (h *handler) Close() error {
	err := h.Proxy.Close()
	h.once.Do(h.release)
	return err
}

// buildLogs builds cfg's access logs with the factories d.Loggers has for the UDP proxy
// (accesslog.UDPLoggers: file, stdout and stderr).
func buildLogs(cfg *Config, d Deps) ([]Logger, error) {
	var out []Logger
	if d.Loggers == nil && len(cfg.AccessLogs) > 0 {
		var err error
		if d.Loggers, err = accesslog.Builtin(); err != nil {
			return nil, err
		}
	}
	for i, al := range cfg.AccessLogs {
		typed := fmt.Sprintf("udp_proxy %q: access_log[%d].typed_config", cfg.StatPrefix, i)
		built, found, err := accesslog.Build(d.Loggers, accesslog.UDPLoggers, typed, al.Name, al.TypedConfig, accesslog.LoggerContext{})
		switch {
		case !found:
			return nil, fmt.Errorf("%s (%q, name %q): only %s are implemented for the UDP proxy", typed, al.TypedConfig.GetTypeUrl(), al.Name, accesslog.Implemented(d.Loggers, accesslog.UDPLoggers))
		case err != nil:
			return nil, err
		case built.Entries != nil:
			return nil, fmt.Errorf("%s (%q): not implemented by Legate for the UDP proxy", typed, al.TypedConfig.GetTypeUrl())
		case d.Files == nil:
			return nil, fmt.Errorf("%s: file access logs are not available", typed)
		}
		f, err := d.Files.Open(built.Line.Path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", typed, err)
		}
		out = append(out, Logger{Filter: al.Filter.Bind(accesslog.FilterOptions{Runtime: d.Runtime}), Format: built.Line.Format, File: f})
	}
	return out, nil
}

// statsTable shares stats registrations by prefix. mu guards refs.
type statsTable struct {
	mu   sync.Mutex
	refs map[string]*shared
}

type shared struct {
	v   any
	reg *stats.Registration
	n   int
}

func (t *statsTable) acquire(store *stats.Store, prefix string, newStats func() any) any {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.refs[prefix]
	if e == nil {
		e = &shared{v: newStats()}
		if store != nil {
			e.reg = store.Register(prefix, e.v)
		}
		t.refs[prefix] = e
	}
	e.n++
	return e.v
}

func (t *statsTable) release(prefix string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.refs[prefix]
	if e == nil {
		return
	}
	if e.n--; e.n == 0 {
		if e.reg != nil {
			e.reg.Unregister()
		}
		delete(t.refs, prefix)
	}
}
