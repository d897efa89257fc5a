package httpproxy

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/accesslog/als"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/healthcheck"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/h2wire"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/overload"
	"github.com/legateproxy/legate/pool"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil"
	"github.com/legateproxy/legate/tracing"
)

// Deps are the server-wide dependencies of every connection manager.
type Deps struct {
	// Clusters is the cluster manager. Required.
	Clusters *cluster.Manager
	// Pools are the upstream connection pools by cluster. Required.
	Pools *pool.Registry
	// Stats is the stats store; nil keeps stats unregistered.
	Stats *stats.Store
	// Logger is the "http" component logger; may be nil.
	Logger *logging.Logger
	// ComponentLogger returns the logger of an Envoy log component (the Lua filter's "lua");
	// nil leaves filters without logs.
	ComponentLogger func(component string) *logging.Logger
	// HealthCheckFailed is the flag the admin's POST /healthcheck/fail sets and
	// /healthcheck/ok clears; nil means never failed.
	HealthCheckFailed *atomic.Bool
	// AccessLogs shares access-log files between listeners and reopens them; nil opens a
	// private manager.
	AccessLogs *accesslog.Manager
	// TLS are the dependencies of downstream TLS contexts (secrets, /certs registry, and
	// the ssl.* stats scopes: each context counts in its listener's scope, StatPrefix is set
	// per chain).
	TLS tlsutil.Deps
	// LocalClusterName is --service-cluster (node.cluster), for the health check filter.
	LocalClusterName string
	// Hostname is what %HOSTNAME% prints; empty means os.Hostname().
	Hostname string
	// Taps is the /tap endpoint's registry of tap filters (filter.Context.Taps); nil when
	// there is no /tap.
	Taps any
	// Filters are the HTTP filters besides the router; nil means the built-in set
	// (envoy.filters.http.health_check).
	Filters *filter.Registry
	// Now is the clock; nil means the system clock.
	Now func() time.Time
	// Routes serves the route configurations of connection managers with rds (RDS); nil
	// refuses rds.
	Routes RouteProvider
	// GRPCAccessLogs makes envoy.access_loggers.http_grpc loggers; nil refuses them.
	GRPCAccessLogs *als.Manager
	// Extensions are the factories of access loggers (accesslog.HTTPLoggers), downstream
	// transport sockets (tlsutil.DownstreamSockets) and retry host predicates
	// (route.RetryHostPredicates); nil means the built-in sets (accesslog's and als' loggers,
	// tlsutil's sockets, route's predicates).
	Extensions *registry.Registry
	// ExtensionConfigs serves HTTP filter configurations over ECDS (config_discovery); nil
	// refuses config_discovery.
	ExtensionConfigs ExtensionConfigProvider
	// ScopedRoutes serves the scopes of connection managers with scoped_routes (SRDS); nil
	// refuses scoped_routes.
	ScopedRoutes ScopedRouteProvider
	// RuntimeFraction decides a route's runtime_fraction through the runtime (key, the
	// default fraction, the request's random value); nil uses the default fraction.
	RuntimeFraction func(key string, numerator, denominator, random uint64) bool
	// Overload is the overload manager's state (stop_accepting_requests,
	// disable_http_keepalive); nil means none. Listeners with bypass_overload_manager ignore it.
	Overload *overload.State
	// Runtime returns the runtime's integer value of key, or def when unset: access log
	// filters read their runtime_key through it (comparison values, runtime_filter). Nil
	// uses the configured defaults.
	Runtime func(key string, def uint64) uint64
	// Tracing is what the tracers of connection managers with tracing are built with (its
	// Stats and Runtime default to those above); a nil Dial refuses tracing.
	Tracing tracing.Deps
}

// Register registers the connection manager's factory (listener.TerminalFilters) with the
// extension registry; package config registers how its typed_config converts (a
// *config.HTTPConnectionManager). The factory serves with the *Service the server gives the
// listener manager (listener.ManagerConfig.Services) under config.HTTPConnectionManagerFilter.
func Register(b *registry.Builder) {
	registry.Add(b, listener.TerminalFilters, config.HTTPConnectionManagerFilter, &hcmv3.HttpConnectionManager{}, build)
}

// build is the connection manager's listener.HandlerFactory.
func build(ctx *listener.ChainContext, decoded any) (listener.FilterChainHandler, error) {
	s, err := listener.Service[*Service](ctx.Services, config.HTTPConnectionManagerFilter)
	if err != nil {
		return nil, err
	}
	return s.Handler(ctx, decoded)
}

// Service is what the connection managers of one server share: their Deps, their stats
// registrations and the Date header's cache. Safe for concurrent use.
type Service struct {
	sh *shared
}

// NewService returns the service of the connection managers built with deps, the defaults
// of Deps applied.
func NewService(deps Deps) (*Service, error) {
	if deps.Clusters == nil || deps.Pools == nil {
		return nil, fmt.Errorf("httpproxy: Deps.Clusters and Deps.Pools are required")
	}
	if deps.Filters == nil {
		var err error
		if deps.Filters, err = filter.Of(healthcheck.Register); err != nil {
			return nil, err
		}
	}
	if deps.AccessLogs == nil {
		deps.AccessLogs = accesslog.NewManager(accesslog.FileOptions{})
	}
	if deps.Extensions == nil {
		var err error
		if deps.Extensions, err = accesslog.Builtin(als.Register, route.Register, tlsutil.Register); err != nil {
			return nil, err
		}
	}
	if deps.Now == nil {
		deps.Now = clock.Real().Now
	}
	return &Service{sh: &shared{deps: deps, stats: newStatsRegistry(deps.Stats), filterStats: filter.NewStats(deps.Stats), dates: newDateCache(deps.Now), stamps: clock.NewStamps(deps.Now)}}, nil
}

// Handler builds the connection manager of one filter chain from its converted
// configuration, a *config.HTTPConnectionManager.
func (s *Service) Handler(ctx *listener.ChainContext, decoded any) (listener.FilterChainHandler, error) {
	cfg, err := listener.ConfigOf[*config.HTTPConnectionManager](config.HTTPConnectionManagerFilter, decoded)
	if err != nil {
		return nil, err
	}
	h, err := s.sh.newHandler(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// shared is what the handlers of one Service share.
type shared struct {
	deps        Deps
	stats       *statsRegistry
	filterStats *filter.Stats
	dates       *dateCache
	// stamps reads deps.Now for durations (the stream's start, the upstream response head's
	// arrival, the response's end); when deps.Now is the system clock (stamps.System), its
	// stamps are clock.Mono's, those of the stream idle timer, which then takes them as they are
	// (stream.monoOf).
	stamps clock.Stamps
}

// filterContext is what the factory of the HTTP filter called name, in the connection
// manager whose stats prefix is hcmPrefix, builds from.
func (sh *shared) filterContext(hcmPrefix, name string) *filter.Context {
	d := &sh.deps
	return &filter.Context{
		Clusters: d.Clusters, HealthCheckFailed: d.HealthCheckFailed, LocalClusterName: d.LocalClusterName, Taps: d.Taps,
		Name: name, StatPrefix: hcmPrefix, Stats: sh.filterStats, Pools: d.Pools,
		Runtime: d.Runtime, RuntimeFraction: d.RuntimeFraction, Now: d.Now, Logger: d.ComponentLogger,
	}
}

// Handler is the HTTP connection manager of one filter chain (Envoy's
// envoy.filters.network.http_connection_manager): it terminates TLS when the chain has a
// transport socket, serves HTTP/1.1 with its own codec and HTTP/2 with golang.org/x/net/http2,
// and runs each request through the configured HTTP filters and the router.
//
// A Handler is safe for concurrent use: its configuration is immutable; per-connection and
// per-stream state belong to the goroutine serving the connection (HTTP/1) or the stream
// (HTTP/2).
type Handler struct {
	sh      *shared
	ov      *overload.State // nil: no overload manager, or the listener bypasses it
	cfg     *config.HTTPConnectionManager
	table   atomic.Pointer[route.Table] // swapped by RDS (rds.go); fixed for route_config
	rds     *rdsRoutes
	ecds    []*ecdsFilter              // filters configured over ECDS (ecds.go)
	scopes  atomic.Pointer[scopeTable] // set with scoped_routes (srds.go): tables by scope key
	srds    *srdsRoutes
	filters []filter.Filter
	// filterNames are the http_filters names of filters, index for index (per-route
	// typed_per_filter_config is keyed by them).
	filterNames []string
	// upFilters are the router's upstream_http_filters, run per upstream attempt
	// (upstreamfilters.go).
	upFilters []filter.Filter
	// clusterChains are the clusters' own upstream filters by cluster name, built on use
	// (upstreamChain); clusterMu guards the map.
	clusterMu     sync.Mutex
	clusterChains map[string]*clusterFilters
	logs          []accessLogger
	trace         *tracer // nil without tracing (trace.go)
	stats         *hcmStats
	lstats        *listenerHTTPStats
	hcmPrefix     string
	lPrefix       string
	tls           *tlsutil.ServerContext
	h2set         h2Settings // what HTTP/2 connections announce and grant
	maxHead       int
	// serverDate is the Server line and Date name a direct response head adds (directhead.go),
	// in lower then proper case; serverDateLines the same followed by the Date of one second
	// and its line end (serverDateLine).
	serverDate      [2]string
	serverDateLines [2]atomic.Pointer[dateValue]
	// serverH2 is the Server field a direct HTTP/2 response head adds, HPACK encoded.
	serverH2 string
	// directPlan is the part of a direct response head's plan the configuration decides.
	directPlan directPlan

	mu       sync.Mutex // guards conns, h2lives, watching, closed and wg.Add
	conns    map[*serverConn]struct{}
	h2lives  map[*h2Lifetime]struct{} // the HTTP/2 connections
	watching bool
	closed   bool
	stop     chan struct{}
	wg       sync.WaitGroup // the drain watcher and the connection goroutines
}

// accessLogger is one access_log entry: its filter (nil logs every request) and its sink, a
// formatted line written to a file or an entry sent to a gRPC access log service.
type accessLogger struct {
	filter *accesslog.Filter
	format *accesslog.Formatter
	file   *accesslog.File
	// entries, when set, receives the entries instead (http_grpc, open_telemetry).
	entries accesslog.EntryLogger
}

// log writes e to the logger if its filter passes it; buf is scratch space for the line,
// returned for reuse.
func (l *accessLogger) log(e *accesslog.Entry, buf []byte) []byte {
	if !l.filter.Match(e) {
		return buf
	}
	if l.entries != nil {
		l.entries.Log(e)
		return buf
	}
	buf = l.format.Format(buf[:0], e)
	l.file.Write(buf)
	return buf
}

// newHandler builds the handler of cfg, which the configuration path converted (rds,
// scoped_routes, config_discovery filters and tracing taken out into their fields).
func (sh *shared) newHandler(ctx *listener.ChainContext, cfg *config.HTTPConnectionManager) (*Handler, error) {
	rds, srds, ecds, tracingPB := cfg.RDS, cfg.ScopedRoutes, cfg.DiscoveredFilters, cfg.Tracing
	if l := sh.deps.Logger; l != nil {
		for _, f := range cfg.Ignored {
			l.Warnf("http_connection_manager %q: %s: set, but not implemented by Legate; ignored (it does not change how traffic is handled)", cfg.StatPrefix, f)
		}
	}
	h, err := sh.build(cfg, ctx)
	if err == nil && tracingPB != nil {
		if err = sh.startTracing(h, tracingPB, ctx.Listener != nil && ctx.Listener.TrafficDirection == config.DirectionOutbound); err != nil {
			h.Close()
		}
	}
	if err == nil && ecds != nil {
		if err = sh.startECDS(h, ecds); err != nil {
			h.Close()
		}
	}
	if err == nil && rds != nil {
		if err = sh.startRDS(h, rds); err != nil {
			h.Close()
		}
	}
	if err == nil && srds != nil {
		if err = sh.startSRDS(h, srds); err != nil {
			h.Close()
		}
	}
	if err != nil {
		return nil, err
	}
	return h, nil
}

// routeOptions are how the route configurations of the connection manager cfg compile.
func (d *Deps) routeOptions(cfg *config.HTTPConnectionManager) route.Options {
	return route.Options{
		StripAnyHostPort: cfg.StripAnyHostPort,
		Hostname:         d.Hostname,
		ClusterExists:    d.Clusters.Has,
		FeatureEnabled:   d.RuntimeFraction,
		PerFilterConfig:  d.Filters.PerRouteConfig,
		Extensions:       d.Extensions,
	}
}

// build makes a handler from a converted configuration.
func (sh *shared) build(cfg *config.HTTPConnectionManager, ctx *listener.ChainContext) (*Handler, error) {
	d := &sh.deps
	if err := checkAllowConnect(cfg); err != nil {
		return nil, err
	}
	opts := d.routeOptions(cfg)
	opts.ValidateClusters = true // Envoy's default for a static route_config
	table, err := route.Compile(cfg.RouteConfig, opts)
	if err != nil {
		return nil, fmt.Errorf("http_connection_manager %q: route_config: %w", cfg.StatPrefix, err)
	}
	h := &Handler{
		sh: sh, cfg: cfg,
		hcmPrefix: "http." + cfg.StatPrefix + ".",
		maxHead:   int(cfg.MaxRequestHeadersKB) << 10,
		conns:     map[*serverConn]struct{}{},
		stop:      make(chan struct{}),
	}
	h.serverDate = serverDate(cfg)
	h.directPlan = planDirectFor(cfg)
	h.serverH2 = string(h2wire.AppendIndexedName(nil, h2wire.StaticName(hdrServer), cfg.ServerName))
	for i, f := range cfg.HTTPFilters {
		if f.IsRouter() {
			continue
		}
		factory, ok := d.Filters.Lookup(f.Name, f.TypedConfig)
		if !ok {
			return nil, fmt.Errorf("http_connection_manager %q: http_filters[%d] = %q: unknown HTTP filter", cfg.StatPrefix, i, f.Name)
		}
		inst, err := factory(f.TypedConfig, sh.filterContext(h.hcmPrefix, f.Name))
		if err != nil {
			h.closeFilters()
			return nil, fmt.Errorf("http_connection_manager %q: http_filters[%d]: %w", cfg.StatPrefix, i, err)
		}
		h.filters = append(h.filters, inst)
		h.filterNames = append(h.filterNames, f.Name)
	}
	if err := sh.buildUpstreamFilters(h); err != nil {
		h.closeFilters()
		return nil, err
	}
	for i, al := range cfg.AccessLogs {
		l, err := sh.accessLog(al, d)
		if err != nil {
			return nil, fmt.Errorf("http_connection_manager %q: access_log[%d]: %w", cfg.StatPrefix, i, err)
		}
		l.filter = al.Filter.Bind(accesslog.FilterOptions{Runtime: d.Runtime})
		h.logs = append(h.logs, l)
	}
	if ctx != nil && ctx.Chain != nil && ctx.Chain.TransportSocket != "" {
		if h.tls, err = downstreamTLS(ctx, d); err != nil {
			return nil, err
		}
	}
	var bufferLimit uint32
	if ctx != nil && ctx.Listener != nil {
		bufferLimit = ctx.Listener.PerConnectionBufferLimitBytes
		if !ctx.Listener.BypassOverloadManager {
			h.ov = d.Overload
		}
	}
	h.h2set = newH2Settings(cfg, bufferLimit)
	lp := ""
	if ctx != nil {
		lp = ctx.StatPrefix
	}
	h.lPrefix = lp + h.hcmPrefix
	h.stats, h.lstats = sh.stats.acquire(h.hcmPrefix, h.lPrefix)
	h.table.Store(table)
	return h, nil
}

// accessLog builds an access_log entry with the factory the registry's accesslog.HTTPLoggers
// has for it.
func (sh *shared) accessLog(al config.AccessLog, d *Deps) (accessLogger, error) {
	c := accesslog.LoggerContext{Hostname: d.Hostname}
	if d.GRPCAccessLogs != nil {
		c.Services = d.GRPCAccessLogs
	}
	l, found, err := accesslog.Build(d.Extensions, accesslog.HTTPLoggers, "typed_config", al.Name, al.TypedConfig, c)
	switch {
	case !found:
		return accessLogger{}, fmt.Errorf("%q (%s): only %s are implemented", al.Name, al.TypedConfig.GetTypeUrl(), accesslog.Implemented(d.Extensions, accesslog.HTTPLoggers))
	case err != nil:
		return accessLogger{}, fmt.Errorf("%q: %w", al.Name, err)
	case l.Entries != nil:
		return accessLogger{entries: l.Entries}, nil
	}
	file, err := d.AccessLogs.Open(l.Line.Path)
	if err != nil {
		return accessLogger{}, err
	}
	return accessLogger{format: l.Line.Format, file: file}, nil
}

// downstreamTLS builds the context of a filter chain's transport socket (nil for plain
// text). As in Envoy, HTTP/2 over TLS is negotiated only when common_tls_context.alpn_protocols
// offers "h2"; otherwise codec AUTO still recognises the HTTP/2 preface.
func downstreamTLS(ctx *listener.ChainContext, d *Deps) (*tlsutil.ServerContext, error) {
	deps := d.TLS
	deps.StatPrefix = ctx.StatPrefix // listener.<address>.ssl.*
	sc, err := tlsutil.ServerContextFor(d.Extensions, ctx.Chain.TransportSocket, ctx.Chain.TransportSocketConfig, deps)
	if err != nil {
		return nil, fmt.Errorf("filter chain %q: %w", ctx.Chain.Name, err)
	}
	return sc, nil
}

// Table returns the compiled route table.
func (h *Handler) Table() *route.Table { return h.table.Load() }

// Close stops the drain watcher and releases the handler's stats and TLS context. The
// listener manager calls it once the filter chain is gone and its last connection closed.
func (h *Handler) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	close(h.stop)
	h.mu.Unlock()
	h.wg.Wait()
	h.stopRDS()
	h.stopECDS()
	h.stopSRDS()
	h.sh.stats.release(h.hcmPrefix, h.lPrefix)
	h.stopTracing()
	if h.tls != nil {
		h.tls.Close()
	}
	h.closeFilters()
	return nil
}

// closeFilters closes the filters that hold resources (io.Closer), such as a tap filter's
// registration with the admin's /tap: the configuration that built them is gone.
func (h *Handler) closeFilters() {
	for _, f := range slices.Concat(h.filters, h.upFilters) {
		if c, ok := f.(io.Closer); ok {
			c.Close()
		}
	}
}
