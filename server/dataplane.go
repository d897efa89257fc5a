package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/accesslog/als"
	"github.com/legateproxy/legate/admin"
	"github.com/legateproxy/legate/admin/configdump"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/cluster/cds"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/httpproxy"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/tap"
	"github.com/legateproxy/legate/internal/exepages"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/options"
	"github.com/legateproxy/legate/overload"
	"github.com/legateproxy/legate/pool"
	"github.com/legateproxy/legate/runtime"
	"github.com/legateproxy/legate/tcpproxy"
	"github.com/legateproxy/legate/tlsutil"
	"github.com/legateproxy/legate/tracing"
	"github.com/legateproxy/legate/udpproxy"
)

// dataPlane is what carries traffic: upstream pools, the services the connection managers
// and TCP proxies serve with, and the listeners themselves.
type dataPlane struct {
	secrets    tlsutil.StaticSecrets
	pools      *pool.Registry
	accessLogs *accesslog.Manager
	als        *als.Manager // envoy.access_loggers.http_grpc streams
	listeners  *listener.Manager
	overload   *overload.Manager // nil State without overload_manager
	// httpFilters are the HTTP filters connection managers build from; RDS checks
	// typed_per_filter_config against them too.
	httpFilters *filter.Registry
	// taps is the /tap endpoint's registry of tap filters (filter.Context.Taps).
	taps *tap.Manager

	tlsMu sync.Mutex // guards upstreamTLS
	// upstreamTLS caches the client TLS context of each transport socket of
	// each cluster (its transport_socket and transport_socket_matches); a nil
	// entry means plain TCP. Keyed by the cluster config, so a CDS update gets
	// fresh contexts.
	upstreamTLS map[upstreamSocket]*tlsutil.ClientContext
	// tlsStats are the ssl.* stats of listener and cluster scopes, shared by
	// the TLS contexts of each scope.
	tlsStats *tlsutil.StatsScopes
}

// buildHTTPFilters takes the HTTP filters from the extension registry (extensions.New).
// Tap filters with an admin_config share one manager (filter.Context.Taps) with the admin's
// POST /tap, which exists while they do. It runs before the xDS client, whose RDS checks per-route filter
// configurations against the registry.
func (s *Server) buildHTTPFilters() error {
	r, err := filter.FromRegistry(s.ext)
	if err != nil {
		return err
	}
	s.data.taps = tap.NewManager()
	admin.WatchTap(s.reg, s.data.taps)
	s.data.httpFilters = r
	return nil
}

// hostTLS returns the client TLS context of h's transport socket: the host's metadata chose
// it (transport_socket_matches), and a host never changes socket, so each host's pools keep
// to one. A nil context comes with the configuration to use instead: nil (plain text) or
// one failing every handshake (never plain text for a TLS cluster whose SDS secret timed out).
func (s *Server) hostTLS(c *config.Cluster, h *host.Host) (*tlsutil.ClientContext, *tls.Config) {
	ctx, err := s.clusterTLS(c, h.SocketMatch())
	if err != nil {
		return nil, failingTLS(err)
	}
	return ctx, nil
}

// socketTLS returns the client TLS configuration of a connection to h over the cluster's
// transport socket i (the host's, or the one the downstream's filter state chose): nil for
// plain text, one failing every handshake when the context cannot be had.
func (s *Server) socketTLS(c *config.Cluster, h *host.Host, i int) *tls.Config {
	ctx, err := s.clusterTLS(c, i)
	switch {
	case err != nil:
		return failingTLS(err)
	case ctx == nil:
		return nil
	case h.Hostname() != "":
		return ctx.ConfigForHost(h.Hostname())
	}
	return ctx.Config()
}

// buildDataPlane creates pools, the services of the HTTP connection manager and the TCP
// proxy, and builds the static listeners without binding them (Start binds, once
// initialization is done).
func (s *Server) buildDataPlane() error {
	dp := &s.data
	dp.upstreamTLS = map[upstreamSocket]*tlsutil.ClientContext{}
	s.clusters.OnRetire(s.retireUpstreamTLS) // for the server's life: the manager ends with it
	dp.tlsStats = tlsutil.NewStatsScopes(s.store)
	secrets, err := tlsutil.StaticSecretsFromProto("static_resources.secrets", s.boot.Proto.GetStaticResources().GetSecrets())
	if err != nil {
		return err
	}
	dp.secrets = secrets
	// Upstream TLS is checked now, so a bad certificate fails the start
	// rather than the first request.
	// Clusters loading secrets over SDS are checked when the secrets arrive.
	for _, c := range s.boot.Clusters {
		for i := range 1 + len(c.TransportSocketMatches) {
			if _, err := s.clusterTLS(c, i); err != nil && !cds.HasUpstreamSecrets(c.TransportSocketFor(i)) {
				return err
			}
		}
	}
	if dp.pools, err = pool.NewRegistry(pool.RegistryConfig{
		Clusters: s.clusters,
		Stats:    s.store,
		TLSStats: s.clusterTLSStats,
		// Endpoints with an envoy_internal_address reach the internal listeners in memory;
		// the listener manager is built below, before any traffic.
		DialInternal: func(ctx context.Context, address string) (net.Conn, error) {
			return dp.listeners.DialInternal(ctx, address)
		},
		TLS: func(c *config.Cluster, h *host.Host) *tls.Config {
			return s.socketTLS(c, h, h.SocketMatch())
		},
		// transport_socket_matcher over filter state: a connection's own socket.
		SocketTLS: s.socketTLS,
		// auto_sni, auto_san_validation: the pools keep these connections per name.
		AuthorityTLS: func(c *config.Cluster, h *host.Host, name string) *tls.Config {
			ctx, failed := s.hostTLS(c, h)
			if ctx == nil {
				return failed
			}
			return ctx.ConfigForAuthority(name, c.UpstreamHTTP.AutoSNI, c.UpstreamHTTP.AutoSANValidation)
		},
	}); err != nil {
		return err
	}
	// Unhealthy or ejected hosts lose their idle connections (and every
	// connection with close_connections_on_host_health_failure).
	s.clusters.OnHostHealthFailure(dp.pools.HostFailed)
	dp.accessLogs = accesslog.NewManager(accesslog.FileOptions{FlushInterval: s.opts.FileFlushInterval, Clock: s.clock})
	if dp.als, err = als.NewManager(als.Config{
		Dial:          s.dialXDS, // a host of the bootstrap cluster, with its TLS
		ClusterExists: s.clusters.Has,
		Node:          s.Node(),
		Stats:         s.store,
		Logger:        s.logs.Logger("grpc"),
		Clock:         s.clock,
	}); err != nil {
		return err
	}

	exepages.Checkpoint() // between the services' constructions, as in New
	hcm, err := httpproxy.NewService(httpproxy.Deps{
		Now:               s.clock.Now,
		Filters:           dp.httpFilters,
		Clusters:          s.clusters,
		Pools:             dp.pools,
		Stats:             s.store,
		Logger:            s.logs.Logger("http"),
		ComponentLogger:   s.logs.Logger,
		HealthCheckFailed: &s.healthFailed,
		Taps:              dp.taps,
		AccessLogs:        dp.accessLogs,
		TLS:               tlsutil.Deps{Secrets: s.secretProvider(), Registry: s.certs, Now: s.clock.Now, Stats: dp.tlsStats},
		LocalClusterName:  s.Node().GetCluster(),
		Routes:            s.routeProvider(),
		GRPCAccessLogs:    dp.als,
		Extensions:        s.ext,
		ExtensionConfigs:  s.extensionProvider(),
		ScopedRoutes:      s.scopedRouteProvider(),
		RuntimeFraction:   s.routeFraction,
		Runtime:           s.runtimeUint64,
		Overload:          dp.overload.State(),
		Tracing: tracing.Deps{
			Dial:         s.dialXDS, // a host of the collector's cluster, with its TLS
			NodeID:       s.Node().GetId(),
			Zone:         s.Node().GetLocality().GetZone(),
			LocalCluster: s.Node().GetCluster(),
			Clock:        s.clock,
			Default:      s.boot.Proto.GetTracing().GetHttp(),
			Tracers:      s.ext,
		},
	})
	if err != nil {
		return err
	}
	tcp := tcpproxy.NewService(tcpproxy.Deps{
		Pools:    dp.pools,
		Overload: dp.overload.State(),
		Sockets:  s.ext,
		TLS:      tlsutil.Deps{Secrets: s.secretProvider(), Registry: s.certs, Now: s.clock.Now, Stats: dp.tlsStats},
		AccessLogs: tcpproxy.AccessLogDeps{
			Files:   dp.accessLogs,
			GRPC:    dp.als,
			Loggers: s.ext,
			Runtime: s.runtimeUint64,
		},
	})
	udp := udpproxy.NewService(udpproxy.Deps{
		Clusters: s.clusters,
		Clock:    s.clock,
		Files:    dp.accessLogs,
		Loggers:  s.ext,
		Runtime:  s.runtimeUint64,
	})
	exepages.Checkpoint()
	strategy := listener.DrainGradual
	if s.opts.DrainStrategy == options.DrainImmediate {
		strategy = listener.DrainImmediate
	}
	if dp.listeners, err = listener.NewManager(listener.ManagerConfig{
		Clock:         s.clock,
		Stats:         s.store,
		Logger:        s.logs.Logger("config"),
		DrainTime:     s.opts.DrainTime,
		DrainStrategy: strategy,
		// The terminal filters that serve with the data plane find it here: their factories
		// are in the registry, frozen before these services were built.
		Services: listener.Services{config.HTTPConnectionManagerFilter: hcm, config.TCPProxyFilter: tcp,
			config.UDPProxyFilter: udp},
		Workers:           int(s.opts.Concurrency),
		HealthCheckFailed: s.healthFailed.Load,
		Overload:          dp.overload.State(),
		Runtime:           s.runtimeUint64,
		AccessLogs:        s.listenerAccessLogs,
		InternalListener:  s.boot.InternalListener,
		Extensions:        s.ext,
		Dial:              dp.pools.Dial, // ratelimit's and ext_authz's services
	}); err != nil {
		return err
	}
	exepages.Checkpoint()
	var static []*config.Listener
	for i, pb := range s.boot.Proto.GetStaticResources().GetListeners() {
		l, err := config.ListenerFromProto(pb, config.Limits{Extensions: s.ext})
		if err != nil {
			return fmt.Errorf("static_resources.listeners[%d]: %w", i, err)
		}
		static = append(static, l)
	}
	exepages.Checkpoint()
	if err := dp.listeners.AddStatic(static); err != nil {
		return err
	}
	exepages.Checkpoint()
	dump, err := s.listenersDump()
	if err != nil {
		return err
	}
	return s.dumps.Add(configdump.Tracker{Key: "listeners", Dump: dump})
}

// adminLimit is how the admin's connections count against the overload manager's global
// connection limit: not at all with admin.ignore_global_conn_limit.
func (s *Server) adminLimit(a *config.Admin) func(net.Listener) net.Listener {
	if a.IgnoreGlobalConnLimit {
		return nil
	}
	return s.data.overload.State().LimitListener
}

// upstreamSocket is one transport socket of a cluster: i is MatchTransportSocket's index.
type upstreamSocket struct {
	c *config.Cluster
	i int
}

// retireUpstreamTLS closes the TLS contexts of a cluster that CDS removed or replaced (the
// cluster manager's OnRetire), unless a current cluster still has its configuration, so that
// /certs and cluster.<name>.ssl.* stop listing them. Connections already made keep their
// tls.Config.
func (s *Server) retireUpstreamTLS(c *cluster.Cluster) {
	cfg := c.Config()
	if s.clusters.HasConfig(cfg) {
		return
	}
	dp := &s.data
	var ctxs []*tlsutil.ClientContext
	dp.tlsMu.Lock()
	for i := range 1 + len(cfg.TransportSocketMatches) {
		k := upstreamSocket{cfg, i}
		ctxs = append(ctxs, dp.upstreamTLS[k])
		delete(dp.upstreamTLS, k)
	}
	dp.tlsMu.Unlock()
	for _, ctx := range ctxs {
		if ctx != nil {
			ctx.Close()
		}
	}
}

// clusterTLSStats returns the cluster.<name>.ssl.* stats its upstream TLS handshakes count
// in (every TLS socket of the cluster shares them); nil for a plain-text cluster.
func (s *Server) clusterTLSStats(c *config.Cluster) *tlsutil.Stats {
	for i := range 1 + len(c.TransportSocketMatches) {
		if ctx, err := s.clusterTLS(c, i); err == nil && ctx != nil {
			return ctx.Stats()
		}
	}
	return nil
}

// clusterTLS returns the client TLS context of the cluster's transport socket i (see
// config.Cluster.MatchTransportSocket), building it on first use; nil for a plain-text
// socket.
func (s *Server) clusterTLS(c *config.Cluster, i int) (*tlsutil.ClientContext, error) {
	dp := &s.data
	dp.tlsMu.Lock()
	defer dp.tlsMu.Unlock()
	key := upstreamSocket{c, i}
	if ctx, ok := dp.upstreamTLS[key]; ok {
		return ctx, nil
	}
	cfg, err := tlsutil.Upstream(s.ext, c.TransportSocketPath(i), c.TransportSocketFor(i))
	if err != nil {
		return nil, err
	}
	var ctx *tlsutil.ClientContext
	if cfg != nil {
		deps := tlsutil.Deps{Secrets: s.secretProvider(), Registry: s.certs, Now: s.clock.Now, Stats: dp.tlsStats, StatPrefix: "cluster." + c.Name + "."}
		if !s.clusters.HasConfig(c) {
			// Retired already (a connection of a request that picked the replaced cluster):
			// its OnRetire has run or is waiting for tlsMu, so a context cached now would
			// stay in /certs for ever. This one serves the caller and is never listed.
			deps.Registry = nil
			if ctx, err = tlsutil.NewClientContext(*cfg, deps); err != nil {
				return nil, err
			}
			ctx.Close()
			return ctx, nil
		}
		if ctx, err = tlsutil.NewClientContext(*cfg, deps); err != nil {
			return nil, err
		}
	}
	dp.upstreamTLS[key] = ctx
	return ctx, nil
}

// failingTLS is a client configuration whose handshakes fail with err: a
// cluster whose TLS context cannot be built (its SDS secret has not arrived)
// must fail its connections, as Envoy's do, rather than send plain text.
func failingTLS(err error) *tls.Config {
	return &tls.Config{
		InsecureSkipVerify: true,
		VerifyConnection:   func(tls.ConnectionState) error { return err },
	}
}

// runtimeUint64 reads an integer runtime key from the current snapshot (access log filters'
// runtime_key).
func (s *Server) runtimeUint64(key string, def uint64) uint64 {
	return s.runtime.Snapshot().Uint64(key, def)
}

// routeFraction decides a route's runtime_fraction as Envoy's featureEnabled(key, default,
// random) does: the runtime's value of key, else the route's default fraction.
func (s *Server) routeFraction(key string, numerator, denominator, random uint64) bool {
	def := runtime.Percent{Numerator: uint32(numerator), Denominator: runtime.DenominatorOf(denominator)}
	return s.runtime.Snapshot().FractionalPercentWith(key, def, random)
}
