// Package rds is the route table's side of xDS: RDS, VHDS and SRDS. It keeps the state
// machines the xDS client hands those types to through the watch API (package xds/watch):
//   - RDS: route configurations watched by name (watch.Client.Watch), one subscription per
//     name and transport shared by every connection manager, decoded and trial-compiled with
//     httpproxy/route (DecodeRouteConfig) so that what the connection managers would refuse
//     is NACKed; http.<stat_prefix>.rds.<name>.* (config_reload through the type's Observer)
//     and Envoy's init target for a subscription made before the client runs.
//   - VHDS: a wildcard delta stream per transport (watch.Streams), whose virtual hosts join
//     the route configurations naming that source ("<route config>/<host>"), with on-demand
//     requests for a host a request lacks (RequestVirtualHost, envoy.filters.http.on_demand),
//     http.<stat_prefix>.rds.vhds.<name>.* and the merged routes dump.
//   - SRDS: a wildcard stream per transport of scopes (ScopedRouteConfiguration), each
//     naming the route configuration it routes with, subscribed through RDS (on_demand scopes
//     when a request asks), http.<stat_prefix>.scoped_rds.<name>.* and the route_scopes dump.
//     Both sides of a scope key live here: a scope's (ScopeKey) and a request's (KeyBuilder,
//     the connection manager's scope_key_builder, which it runs per request).
//
// It serves the connection managers (httpproxy.RouteProvider, VirtualHostRequester,
// ScopedRouteProvider, OnDemandScopedRouteProvider: the handler compiles what it receives
// into its table) and the warming LDS listeners (WatchRouteDependency,
// WatchScopedDependency, through listener/lds.Owners). It imports the route table, the watch
// contract and xds/resource, never the client nor the connection manager: the server wires
// it.
//
// Wiring (the server owns it):
//
//	d, err := rds.New(rds.Config{Client: xdsClient, Stats: store, Init: initFn,
//		RouteOptions: opts})
//	httpproxy.Deps{Routes: d, ScopedRoutes: d, ...}
//	lds.Owners{Routes: lds.Watcher(d.WatchRouteDependency), ...}
//	d.Start()            // before the client runs: later SRDS subscriptions hold no init target
//	go func() { xdsClient.Run(ctx); d.Stop() }()
//	d.RoutesConfigDump, d.ScopedRoutesConfigDump // the routes and route_scopes dumps
package rds
