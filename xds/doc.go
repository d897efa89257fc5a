// Package xds is Legate's xDS client for CDS and EDS: it reads the bootstrap's
// dynamic_resources (cds_config, ads_config) and the eds_config of EDS clusters, opens the
// transports they name — one ADS stream multiplexing every type (CDS requests before EDS), a
// state-of-the-world or delta gRPC stream per type and source, REST polling, or a watched file —
// and applies what arrives: clusters to the cluster manager (cluster.Manager.AddOrUpdate,
// Remove, SetVersionInfo) and assignments to EDS clusters (cluster.Cluster.ApplyAssignment).
// Each response is ACKed, or NACKed with an error_detail naming the resource and the rule while
// the last good configuration keeps serving. Decoding and validation live in xds/resource.
//
// Wiring (the server owns it):
//
//	c, err := xds.New(xds.Config{DynamicResources: b.DynamicResources, Node: node,
//		Clusters: cm, Stats: store, Logger: log, Init: initFn, Dial: tlsDial})
//	go c.Run(ctx)                         // returns after ctx ends and every stream is closed
//	dump := c.ClustersConfigDump(match)   // the "clusters" config dump with error_state
//
// Concurrency: Run owns one goroutine per transport (plus a reader per gRPC stream); each is
// stopped by Run's context and awaited before Run returns. Client.mu serialises every update
// of the CDS and EDS state; a transport's own mutex guards its subscription state. Lock order:
// Client.mu, then a transport's mutex, then the cluster manager's locks; none is held while
// waiting on the network.
package xds
