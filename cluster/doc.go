// Package cluster is Legate's cluster manager: upstream clusters by name, their discovery
// (static.go, strictdns.go, logicaldns.go, originaldst.go, eds.go, aggregate.go for the
// envoy.clusters.aggregate custom type) and the immutable snapshots the data plane reads.
//
// Wiring (the server owns it):
//
//	m, err := cluster.NewManager(cluster.ManagerConfig{Stats: store, Logger: log, Init: initFn,
//		LocalClusterName: name, ServiceZone: zone})
//	err = m.AddStatic(clusters)         // []*config.Cluster from config.ClusterFromProto
//	go m.Run(ctx)                       // DNS refresh and ORIGINAL_DST cleanup; returns after ctx ends
//	c := m.Get("web")                   // active cluster, lock-free
//	h, err := c.Pick(&lb.Context{...})  // lock-free, allocation-free (except new ORIGINAL_DST hosts)
//	snap := c.Snapshot()                // hosts, balancer, breaker, stats, per-host stats
//
// CDS uses AddOrUpdate, Remove and SetVersionInfo; the EDS subscription calls
// Cluster.ApplyAssignment. /clusters reads Manager.Snapshot and /config_dump Manager.ConfigDump.
//
// Concurrency: every cluster publishes an immutable Snapshot through an atomic pointer; picks,
// breaker acquires and stat increments take no lock. Host updates of a cluster run under that
// cluster's mutex and are published as a new Snapshot: membership changes at once, health,
// weight and metadata changes merged over common_lb_config.update_merge_window (with the
// injected Clock). The Manager's mutex guards only the cluster maps; Get reads an atomically
// published copy. Discovery goroutines are started by Run and end when its context ends.
package cluster
