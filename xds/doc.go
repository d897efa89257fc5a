// Package xds is Legate's xDS client. It reads the bootstrap's dynamic_resources (ads_config)
// and serves the watches of resource types their owners describe (package xds/watch:
// Client.Watch for types watched by name, the runtime's RTDS layers, TLS's SDS secrets, the
// connection manager's ECDS filter configurations and the route table's RDS route
// configurations; Client.Stream for types whose owners apply responses whole, CDS and EDS in
// cluster/cds, LDS in listener/lds, SRDS and VHDS in httpproxy/rds). It opens the transports
// they name — one ADS stream multiplexing every type (CDS, EDS, LDS, RDS, SRDS, VHDS, ECDS,
// SDS, RTDS), a state-of-the-world or delta gRPC stream per type and source, REST polling, or
// a watched file — and hands what arrives to the owners: watched resources to their watchers,
// streamed responses to their appliers. Each response is ACKed, or NACKed with an
// error_detail naming the resource and the rule while the last good configuration keeps
// serving; the client keeps each watched subscription's state (States) for the owners' config
// dumps. Decoding and validation live with the owners (and the steps every type shares in
// xds/watch and xds/resource): the client imports none of them, only the watch contract, so
// it sits low in the layers (docs/DESIGN.md).
//
// Wiring (the server owns it):
//
//	c, err := xds.New(xds.Config{DynamicResources: b.DynamicResources, Node: node,
//		Stats: store, Init: initFn, Dial: tlsDial})
//	sds.SetClient(c)          // sds is tlsutil.NewSDS(static, certs.Reload): TLS owns SDS
//	ecds.SetClient(c)         // ecds is httpproxy.NewECDS(store, factoryCheck, log)
//	routes, err := rds.New(rds.Config{Client: c, ...}) // the route table owns RDS, VHDS, SRDS
//	d, err := cds.New(cds.Config{Client: c, ...}) // the cluster side owns CDS and EDS
//	err = runtime.WatchRTDS(c, layers, rt.SetRTDSLayer, log) // owners watch before Run
//	httpproxy.Deps{Routes: routes, ScopedRoutes: routes, ExtensionConfigs: ecds, ...}
//	l, err := lds.New(lds.Config{Client: c, Deps: lds.Owners{...}.Watch, ...})
//	d.Start(); routes.Start(); l.Start()  // the owners, before the client runs
//	go c.Run(ctx)                         // returns after ctx ends and every stream is closed
//
// Concurrency: Run owns one goroutine per transport (plus a reader per gRPC stream); each is
// stopped by Run's context and awaited before Run returns. Client.mu guards ran and the count
// of open streams; muxMu guards the transports and the watched types' handlers; each watched
// type's handler has its own mutex and calls its watchers with no lock held, and appliers
// are called without the client's locks. Lock order: an owner's lock (cds.Discovery.mu,
// lds.LDS.mu, rds.Discovery.mu, held while it applies a streamed response or subscribes),
// muxMu, a watched type's handler's mutex, a transport's mutex; Client.mu is a leaf. None is
// held while waiting on the network.
package xds
