package server

import (
	"context"
	"fmt"
	"net"
	"sync"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/admin/configdump"
	"github.com/legateproxy/legate/cluster/cds"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/rds"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/listener/lds"
	"github.com/legateproxy/legate/runtime"
	"github.com/legateproxy/legate/tlsutil"
	"github.com/legateproxy/legate/xds"
)

// buildXDS creates the xDS client when the bootstrap has dynamic resources
// or EDS clusters, and registers the clusters config dump: the client's,
// which adds CDS error states, or the cluster manager's.
func (s *Server) buildXDS() error {
	s.staticDeps = decodeStaticListeners(s.boot.Proto.GetStaticResources().GetListeners())
	needed := s.boot.Proto.GetDynamicResources() != nil
	for _, l := range s.staticDeps {
		// Envoy starts these subscriptions without a dynamic_resources block.
		if len(l.Routes)+len(l.ScopedRoutes)+len(l.Extensions)+len(l.Secrets) > 0 {
			needed = true
		}
	}
	for _, c := range s.boot.Clusters {
		if c.Proto.GetEdsClusterConfig() != nil {
			needed = true
		}
		for i := range 1 + len(c.TransportSocketMatches) {
			if cds.HasUpstreamSecrets(c.TransportSocketFor(i)) {
				needed = true
			}
		}
	}
	var rtds []*bootstrapv3.RuntimeLayer_RtdsLayer
	for _, l := range s.boot.Proto.GetLayeredRuntime().GetLayers() {
		if r := l.GetRtdsLayer(); r != nil {
			rtds = append(rtds, r)
			needed = true
		}
	}
	if !needed {
		return s.dumps.Add(configdump.Tracker{Key: "clusters", Dump: s.clusters.ConfigDump})
	}
	static, err := tlsutil.StaticSecretsFromProto("static_resources.secrets", s.boot.Proto.GetStaticResources().GetSecrets())
	if err != nil {
		return err
	}
	// TLS owns SDS: secrets are watched through the client and the contexts reload on each
	// change.
	sds := tlsutil.NewSDS(static, func() { _ = s.certs.Reload() })
	// The connection manager owns ECDS: what a warming listener's HTTP filters would refuse
	// is NACKed.
	ecds := httpproxy.NewECDS(s.store, httpproxy.CheckDiscoveredFilter(s.data.httpFilters, &filter.Context{
		Clusters: s.clusters, HealthCheckFailed: &s.healthFailed, LocalClusterName: s.Node().GetCluster(), Taps: s.data.taps,
	}), s.logs.Logger("config"))
	client, err := xds.New(xds.Config{
		Clock:            s.clock,
		DynamicResources: s.boot.Proto.GetDynamicResources(),
		Node:             s.Node(),
		Clusters:         s.clusters,
		Stats:            s.store,
		Logger:           s.logs.Logger("config"),
		Init:             s.initTarget,
		Dial:             s.dialXDS,
	})
	if err != nil {
		return err
	}
	sds.SetClient(client)
	// The route table's side owns RDS, VHDS and SRDS: what the connection managers would
	// refuse is NACKed.
	routes, err := rds.New(rds.Config{
		Client: client,
		Stats:  s.store,
		Logger: s.logs.Logger("config"),
		Init:   s.initTarget,
		Clock:  s.clock,
		RouteOptions: route.Options{
			ClusterExists:   s.clusters.Has,
			PerFilterConfig: s.data.httpFilters.PerRouteConfig,
			Extensions:      s.ext,
		},
	})
	if err != nil {
		return err
	}
	// The cluster manager's side owns CDS and EDS. LDS starts once its init target is ready
	// (cdsInitialized), as Envoy starts LDS after the cluster manager's initialization.
	d, err := cds.New(cds.Config{
		Client:           client,
		DynamicResources: s.boot.Proto.GetDynamicResources(),
		Clusters:         s.clusters,
		Stats:            s.store,
		Logger:           s.logs.Logger("config"),
		Init: func(name string) (func(), error) {
			ready, err := s.initTarget(name)
			if err != nil {
				return nil, err
			}
			done := make(chan struct{})
			s.cdsInitialized = done
			var once sync.Once
			return func() { ready(); once.Do(func() { close(done) }) }, nil
		},
		Clock:   s.clock,
		Limits:  config.Limits{MaxObjNameLen: s.opts.MaxObjNameLen, UpstreamBindAddress: s.boot.UpstreamBindAddress, UpstreamSocketOptions: s.boot.UpstreamSocketOptions, Extensions: s.ext},
		Secrets: sds,
	})
	if err != nil {
		return err
	}
	ecds.SetClient(client)
	s.xds, s.sds, s.cds, s.ecds, s.routes = client, sds, d, ecds, routes
	// The runtime owns RTDS: its layers are watched before the client runs, so that
	// initialization waits for them.
	if err := runtime.WatchRTDS(client, rtds, s.runtime.SetRTDSLayer, s.logs.Logger("config")); err != nil {
		return err
	}
	if err := s.dumps.Add(configdump.Tracker{Key: "ecds_filter_http", Dump: func(match func(string) bool) proto.Message {
		// Envoy has no ecds section until some filter discovers its configuration.
		if d := client.EcdsConfigDump(match); len(d.GetEcdsFilters()) > 0 {
			return d
		}
		return nil
	}}); err != nil {
		return err
	}
	// Bootstrap clusters with SDS secrets: initialization waits for them;
	// the subscriptions last as long as the client.
	for _, c := range s.boot.Clusters {
		for i := range 1 + len(c.TransportSocketMatches) {
			if err := s.watchClusterSecrets(c.Name, c.TransportSocketFor(i)); err != nil {
				return err
			}
		}
	}
	return s.dumps.Add(configdump.Tracker{Key: "clusters", Dump: d.ClustersConfigDump})
}

// initTarget registers an init target named name with the server's initialization and
// returns its ready function.
func (s *Server) initTarget(name string) (func(), error) {
	t, err := s.init.Add(name)
	if err != nil {
		return nil, err
	}
	return t.Ready, nil
}

// watchClusterSecrets subscribes to the SDS secrets of a bootstrap cluster's transport socket
// (an UpstreamTlsContext naming secrets with an sds_config); CDS clusters are subscribed by
// the xDS client. Made before the client runs, each subscription registers an init target
// ("SdsApi <name>"), so initialization waits for the secrets or their initial_fetch_timeout,
// as Envoy's static clusters warm on SDS. The subscriptions last as long as the client.
func (s *Server) watchClusterSecrets(name string, ts *corev3.TransportSocket) error {
	deps, err := cds.UpstreamSecretDependencies(fmt.Sprintf("cluster %q: transport_socket", name), ts)
	if err != nil {
		return err
	}
	for _, d := range deps {
		if _, err := s.sds.Watch(d.Config, d.Name, nil); err != nil {
			return err
		}
	}
	return nil
}

// decodeStaticListeners decodes the static listeners as LDS would, to learn
// the xDS resources each subscribes to (RDS, SRDS, ECDS, SDS); their network filters
// are decoded by the data plane (buildDataPlane), not here. A listener that does not
// decode is left out: the data plane reports it.
func decodeStaticListeners(ls []*listenerv3.Listener) []*lds.Listener {
	var out []*lds.Listener
	for _, l := range ls {
		a, err := anypb.New(l)
		if err != nil {
			continue
		}
		if rl, err := lds.DecodeListener(a, nil); err == nil {
			out = append(out, rl)
		}
	}
	return out
}

// dialXDS connects to a host of the bootstrap cluster serving xDS (or the gRPC access-log
// service) through the pools' dialer (pool.Registry.Dial): the cluster's connect_timeout,
// bind and socket options, TLS with h2 by ALPN, and its connection stats.
func (s *Server) dialXDS(ctx context.Context, name string) (net.Conn, error) {
	if s.data.pools == nil {
		return nil, fmt.Errorf("xds: cluster %q: the data plane is not built yet", name)
	}
	conn, err := s.data.pools.Dial(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("xds: %w", err)
	}
	return conn, nil
}

// secretProvider resolves sds_secret_config names: the xDS client (static
// secrets, then SDS) when there is one, else the static secrets.
func (s *Server) secretProvider() tlsutil.SecretProvider {
	if s.sds != nil {
		return s.sds
	}
	return s.data.secrets
}

// routeProvider serves RDS to the HTTP connection managers; nil without xDS.
func (s *Server) routeProvider() httpproxy.RouteProvider {
	if s.routes != nil {
		return s.routes
	}
	return nil
}

// extensionProvider serves ECDS to the HTTP filters; nil without xDS.
func (s *Server) extensionProvider() httpproxy.ExtensionConfigProvider {
	if s.ecds != nil {
		return s.ecds
	}
	return nil
}

// scopedRouteProvider serves SRDS to the HTTP connection managers; nil
// without xDS.
func (s *Server) scopedRouteProvider() httpproxy.ScopedRouteProvider {
	if s.routes != nil {
		return s.routes
	}
	return nil
}

// scopedRoutesDump is the "route_scopes" dump: the scoped routes of the
// connection managers (empty without xDS).
func (s *Server) scopedRoutesDump(match func(string) bool) proto.Message {
	if s.routes == nil {
		return &adminv3.ScopedRoutesConfigDump{}
	}
	return s.routes.ScopedRoutesConfigDump(match)
}

// listenersDump builds LDS, the listener manager's xDS side, when lds_config is set, and
// returns the listeners config dump (with LDS warming and error states when it runs).
func (s *Server) listenersDump() (func(func(string) bool) proto.Message, error) {
	lm := s.data.listeners
	if s.xds == nil {
		return lm.ConfigDump, nil
	}
	l, err := lds.New(lds.Config{
		Client: s.xds,
		Deps: lds.Owners{
			Routes:       lds.Watcher(s.routes.WatchRouteDependency),
			ScopedRoutes: lds.Watcher(s.routes.WatchScopedDependency),
			Extensions:   s.ecds,
			Secrets:      s.sds,
		}.Watch,
		DynamicResources: s.boot.Proto.GetDynamicResources(),
		Listeners:        lm,
		Stats:            s.store,
		Logger:           s.logs.Logger("config"),
		Init:             s.initTarget,
		Clock:            s.clock,
		Extensions:       s.ext,
	})
	if err != nil || l == nil {
		return lm.ConfigDump, err
	}
	s.lds = l
	return l.ConfigDump, nil
}

// xdsRoutesDump is the RDS part of the routes dump, with VHDS's virtual hosts (empty without
// xDS).
func (s *Server) xdsRoutesDump(match func(string) bool) *adminv3.RoutesConfigDump {
	if s.routes == nil {
		return &adminv3.RoutesConfigDump{}
	}
	return s.routes.RoutesConfigDump(match)
}

// xdsSecretsDump is the SDS part of the secrets dump (empty without xDS).
func (s *Server) xdsSecretsDump(match func(string) bool) *adminv3.SecretsConfigDump {
	if s.xds == nil {
		return &adminv3.SecretsConfigDump{}
	}
	return s.xds.SecretsConfigDump(match)
}
