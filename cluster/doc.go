// Package cluster is Legate's cluster manager: upstream clusters by name, their discovery
// (static.go, strictdns.go, logicaldns.go, originaldst.go, eds.go; cluster_type extensions
// through the customTypes registry of customtype.go, filled at init with the names
// config.ClusterTypes accepts: aggregate.go for envoy.clusters.aggregate, dfp.go for
// envoy.clusters.dynamic_forward_proxy with the DNS caches of dnscache.go, which implement
// dns_cache_config's name, dns_lookup_family, dns_refresh_rate, dns_min_refresh_rate,
// dns_failure_refresh_rate.base_interval, disable_dns_refresh_on_failure, host_ttl,
// max_hosts, dns_cache_circuit_breaker.max_pending_requests, dns_query_timeout,
// preresolve_hostnames, resolved_address_filter (the addresses it matches are dropped; an
// answer left empty is a failure) and the resolver fields (config.DNSResolution), with Envoy's
// dns_cache.<name>.* stats; config refuses the rest: key_value_config, and the cluster's
// allow_coalesced_connections; it applies allow_insecure_cluster_options
// with Envoy's auto_sni and auto_san_validation rule; with sub_clusters_config, subclusters.go
// makes a STRICT_DNS "DFPCluster:<name>:<port>" cluster per name requested instead), their
// active health checking (health.go) and outlier detection (outlier.go), and the immutable
// snapshots the data plane reads.
//
// Name resolution (dns.go): STRICT_DNS and LOGICAL_DNS clusters and DNS caches resolve as
// their config.DNSResolution says, one conversion for both of Envoy's typed_dns_resolver_config
// (c-ares: resolvers, dns_resolver_options; getaddrinfo: num_retries), dns_resolution_config,
// use_tcp_for_dns_lookups and a cluster's dns_resolvers: the servers listed are asked with
// github.com/miekg/dns (over TCP with use_tcp_for_dns_lookups), no servers means Go's resolver
// on resolv.conf (over TCP likewise; no_default_search_domain asks the name rooted, without
// search domains); a lookup that failed temporarily is made again num_retries times.
//
// Wiring (the server owns it):
//
//	m, err := cluster.NewManager(cluster.ManagerConfig{Stats: store, Logger: log, Init: initFn,
//		LocalClusterName: name, ServiceZone: zone, Runtime: rt,
//		OutlierEventLogPath: bootstrap.cluster_manager.outlier_detection.event_log_path})
//	err = m.AddStatic(clusters)         // []*config.Cluster from config.ClusterFromProto
//	go m.Run(ctx)                       // discovery, health checks, outlier sweeps; returns after ctx ends
//	c := m.Get("web")                   // active cluster, lock-free
//	h, err := c.Pick(&lb.Context{...})  // lock-free, allocation-free (except new ORIGINAL_DST hosts)
//	snap := c.Snapshot()                // hosts, balancer, breaker, stats, per-host stats
//	m.Reopen()                          // on /reopen_logs and SIGUSR1: health and outlier event logs
//
// CDS uses AddOrUpdate, Remove and SetVersionInfo; the EDS subscription calls
// Cluster.ApplyAssignment. /clusters reads Manager.Snapshot and /config_dump Manager.ConfigDump.
//
// Hooks for the data plane (router, pools, TCP proxy):
//
//	snap.Outlier().Report(h, outlier.HTTPStatus(code)) // or c.ReportResult(h, r); nil-safe via ReportResult
//	c.HealthChecker().ReportPassiveFailure(h, true)    // x-envoy-immediate-health-check-fail
//	stop := m.OnHostHealthFailure(func(h *host.Host, closeConnections bool) {
//		// drain h's HTTP connections; with close_connections_on_host_health_failure close all of
//		// h's connections, TCP included (Envoy's onHostHealthFailure)
//	})
//
// Health checking and outlier detection follow Envoy: at most one health check per cluster (a
// gRPC one only with http2_protocol_options); hosts of a health-checked cluster start
// /failed_active_hc (plus /pending_active_hc when added after the first host set with
// ignore_new_hosts_until_first_hc); the cluster warms, and the init target is ready, only after
// every host of its first host set has had its first check, and health checks start under Run;
// health and ejection changes republish the snapshot through update_merge_window; a host that
// discovery removes stays, /pending_dynamic_removal, while it passes its checks unless
// ignore_health_on_host_removal is set (EDS drops it as soon as it fails); a passing check
// unejects (successful_active_health_check_uneject_host). Stats are cluster.<name>.health_check.*
// and cluster.<name>.outlier_detection.*.
//
// Concurrency: every cluster publishes an immutable Snapshot through an atomic pointer; picks,
// breaker acquires, outlier reports and stat increments take no lock. Host updates of a cluster
// run under that cluster's mutex and are published as a new Snapshot: membership changes at
// once, health, weight and metadata changes merged over common_lb_config.update_merge_window
// (with the injected Clock, internal/clock's, shared with the health checkers and outlier
// detectors). Membership changes reach the health checker and outlier detector afterwards, under
// the cluster's syncMu, without the cluster's mutex. Health-check and outlier callbacks run on
// their own goroutines and take the cluster's and then the Manager's mutex. The Manager's mutex
// guards only the cluster maps; Get reads an atomically published copy. Background goroutines
// are started by Run and end when its context ends; a removed cluster's checker is closed on a
// goroutine Run awaits.
package cluster
