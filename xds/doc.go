// Package xds is Legate's xDS client. It reads the bootstrap's dynamic_resources (ads_config),
// the rds, scoped_routes and http_filters[].config_discovery of HTTP connection managers and
// the vhds of route configurations, and serves the watches of resource types their owners
// describe (package xds/watch: Client.Watch for types watched by name, the runtime's RTDS
// layers, TLS's SDS secrets and the connection manager's ECDS filter configurations;
// Client.Stream for types whose owners apply responses whole, CDS and EDS in cluster/cds, LDS
// in listener/lds). It opens the transports they name — one ADS stream multiplexing every type
// (CDS, EDS, LDS, RDS, SRDS, VHDS, ECDS, SDS, RTDS), a state-of-the-world or delta gRPC stream
// per type and source, REST polling, or a watched file — and applies what arrives: route
// configurations (with their VHDS virtual hosts) to the connection managers that watch them
// (httpproxy.RouteProvider), scopes and their route configurations to scoped connection
// managers (httpproxy.ScopedRouteProvider), watched resources to their watchers and streamed
// responses to their appliers. It also subscribes to the dependencies an LDS listener warms on
// (WatchListener: route configurations, scoped routes, and the discovered filter
// configurations and secrets watched through Config.Extensions and Config.Secrets). Each
// response is ACKed, or NACKed with an error_detail naming the resource and the rule while the
// last good configuration keeps serving and the config dumps show error_state. Decoding and
// validation live in xds/resource and with the owners of watched types.
//
// Wiring (the server owns it):
//
//	c, err := xds.New(xds.Config{DynamicResources: b.DynamicResources, Node: node,
//		Stats: store, Init: initFn, Dial: tlsDial, Secrets: sds, Extensions: ecds})
//	sds.SetClient(c)          // sds is tlsutil.NewSDS(static, certs.Reload): TLS owns SDS
//	ecds.SetClient(c)         // ecds is httpproxy.NewECDS(store, factoryCheck, log)
//	d, err := cds.New(cds.Config{Client: c, ...}) // the cluster side owns CDS and EDS
//	d.Start()
//	err = runtime.WatchRTDS(c, layers, rt.SetRTDSLayer, log) // owners watch before Run
//	httpproxy.Deps{Routes: c, ExtensionConfigs: ecds, TLS: tlsutil.Deps{Secrets: sds}}
//	l, err := lds.New(lds.Config{Client: c, Deps: lds.DepsFunc(c.WatchListener), ...})
//	l.Start()                             // the listener side owns LDS
//	go c.Run(ctx)                         // returns after ctx ends and every stream is closed
//
// Concurrency: Run owns one goroutine per transport (plus a reader per gRPC stream); each is
// stopped by Run's context and awaited before Run returns. Client.mu guards ran and the count
// of open streams; muxMu guards the transports and the watched types' handlers; each
// named-resource handler (RDS, and one per watched type) and each SRDS and VHDS handler
// has its own mutex and calls its watchers with no lock held; srdsMu guards the SRDS and VHDS
// handler maps and the scoped routes watches. Lock order: an owner's lock (cds.Discovery.mu,
// lds.LDS.mu, held while it applies a streamed response or subscribes to a listener's
// dependencies), muxMu, a named handler's mutex, a transport's mutex; Client.mu is a leaf. None
// is held while waiting on the network.
package xds
