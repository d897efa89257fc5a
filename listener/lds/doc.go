// Package lds is the listener manager's side of xDS: LDS. It keeps the state machine the xDS
// client hands LDS responses to through the watch API (xds/watch.Streams): one wildcard
// subscription on dynamic_resources.lds_config; each listener decodes (DecodeListener:
// protoc-gen-validate rules, config.ListenerFromProto, xds/resource.ListenerDependencies), and
// a new or changed one warms, its dependencies subscribed through their owners (route
// configurations with their VHDS and scoped routes, the route table's httpproxy/rds;
// discovered HTTP filter configurations, the connection manager's ECDS; SDS secrets, TLS's:
// Config.Deps, Owners.Watch), until each has arrived or timed out; it then goes to the listener
// manager, replacing the previous version, which drains. A rejected listener keeps its previous
// version and shows its error_state in the listeners dump; state-of-the-world responses remove
// the listeners they omit. listener_manager.lds.* are its stats, "LDS" its init target, and it
// reports the listeners warming (listener_manager.total_listeners_warming) and their pending
// init targets (/init_dump).
//
// Wiring (the server owns it):
//
//	deps := lds.Owners{Routes: lds.Watcher(routes.WatchRouteDependency),
//		ScopedRoutes: lds.Watcher(routes.WatchScopedDependency), Extensions: ecds, Secrets: sds}
//	l, err := lds.New(lds.Config{Client: xdsClient, Deps: deps.Watch,
//		DynamicResources: dr, Listeners: lm, Stats: store, Init: initFn}) // nil without lds_config
//	l.Start()            // before the client runs
//	go func() { xdsClient.Run(ctx); l.Stop() }()
//	l.ConfigDump         // the "listeners" config dump
//
// Concurrency: LDS.mu guards the state and serialises updates; the xDS client calls Apply on
// its transport goroutine, the initial fetch timer and the dependencies' watchers call in on
// theirs. Lock order: LDS.mu, the listener manager's, the dependencies' and the xDS client's
// locks.
package lds
