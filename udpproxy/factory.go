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

// Declare declares the filter in the extension registry; the server hands Factory to the
// listener manager, which builds a UDP listener's handler with it.
func Declare(b *registry.Builder) {
	b.Declare(registry.UDPListenerFilter, config.UDPProxyFilter, &udpproxyv3.UdpProxyConfig{})
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

// Factory returns the listener manager's builder of UDP proxies. Proxies with the same
// stat_prefix share udp.<stat_prefix>.*, and those of one cluster cluster.<name>.udp.*; a
// registration goes when its last proxy closes.
func Factory(d Deps) listener.PacketHandlerFactory {
	t := &statsTable{refs: map[string]*shared{}}
	return func(ctx *listener.PacketContext) (listener.PacketHandler, error) {
		cfg, err := ConfigFromAny(ctx.Listener.UDP.FilterConfig)
		if err != nil {
			return nil, err
		}
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
