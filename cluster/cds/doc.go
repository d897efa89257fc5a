// Package cds is the cluster manager's side of xDS: CDS and EDS. It decodes and validates
// clusters (DecodeCluster: type URL, protoc-gen-validate rules, config.ClusterFromProto, the
// eds_config source and the SDS secrets of the transport sockets) and load assignments
// (DecodeEndpoints), and keeps the per-type state machines the xDS client hands responses to
// through the watch API (xds/watch.Streams):
//
//   - CDS: one wildcard subscription on dynamic_resources.cds_config. Each response is applied
//     in one cluster.Manager.Batch: clusters are added, updated and (state of the world:
//     those not listed; delta: those named) removed; a rejected cluster keeps its previous
//     version serving and shows its error_state in the clusters dump. A cluster whose
//     UpstreamTlsContext loads SDS secrets waits here until they arrive (dynamic_warming_clusters).
//     cluster_manager.cds.* are its stats; the "cds" init target is ready once the first
//     response (or initial_fetch_timeout) has been handled and every cluster it added has
//     warmed.
//   - EDS: one subscription per (transport, service name), shared by the clusters using it,
//     the bootstrap's EDS clusters included. An EDS cluster warms until its first assignment,
//     its initial_fetch_timeout, or a rejected first assignment (then with no hosts).
//
// Wiring (the server owns it):
//
//	d, err := cds.New(cds.Config{Client: xdsClient, DynamicResources: dr, Clusters: cm,
//		Stats: store, Init: initFn, Limits: lim, Secrets: sds})
//	d.Start()            // before the client runs
//	go func() { xdsClient.Run(ctx); d.Stop() }()
//	d.ClustersConfigDump // the "clusters" config dump
//
// Concurrency: Discovery.mu guards every CDS and EDS state and serialises updates; the xDS
// client calls the appliers on its transport goroutines, the initial fetch timers and secret
// watchers call in on theirs. Lock order: Discovery.mu, the cluster manager's locks, then the
// xDS client's. The decoders have no state and may be called from any goroutine.
package cds
