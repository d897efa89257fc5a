// Package health is Legate's active health checking (core.HealthCheck): a Checker per cluster
// and health check runs HTTP, TCP or gRPC probes against each host on the host's own schedule
// and sets the host's active-HC health flags exactly as Envoy does.
//
// # Using it (for the cluster manager)
//
//	spec := cluster.HealthCheck // converted and checked by config.ClusterFromProto
//	var st health.Stats
//	reg := store.Register("cluster."+statName+".health_check.", &st)
//	hc, err := health.New(spec, health.Options{
//		ClusterName: name, Stats: &st, Scheduler: shared, Clock: clk, Runtime: rt,
//		HadTraffic:   func() bool { return cs.UpstreamCxTotal.Used() || … },
//		TLSConfigFor: tlsFor,
//		OnChange:     func(h *host.Host, changed bool) { if changed { republish() }; countFirstChecks(h) },
//		OnResult:     func(h *host.Host, passed bool) { /* outlier: uneject on a pass */ },
//	})
//	// create hosts with host.Config.Health = health.InitialFlags(addedLater, ignoreNewUntilFirstHC)
//	hc.SetHosts(allHosts) // on every membership change, before publishing the snapshot
//	hc.Start()            // when the cluster starts initialising
//	hc.ReportPassiveFailure(h, immediate) // from the router on x-envoy-immediate-health-check-fail
//	hc.Close(); reg.Unregister()
//
// # Rules implemented (Envoy's health_checker_base_impl and its HTTP, TCP and gRPC checkers)
//
// The first result of a host decides at once. Afterwards an active failure (wrong status, payload
// or gRPC answer) fails a healthy host at once; network failures, timeouts and retriable_statuses
// need unhealthy_threshold in a row; healthy_threshold passes in a row make a failed host healthy.
// The next check is due after interval, unhealthy_interval, or the edge intervals while a
// threshold is pending, or the no-traffic intervals until the cluster has traffic, plus
// interval_jitter_percent and interval_jitter, clamped by the runtime's health_check.min_interval
// and health_check.max_interval. A timeout is a NETWORK_TIMEOUT failure and sets
// /active_hc_timeout on a failed host. x-envoy-degraded sets /degraded_active_hc.
//
// # Concurrency
//
// Each host's state is guarded by its own mutex; health flags are atomics on host.Host. Interval
// and timeout timers come from the injected clock; checks run on goroutines owned by the Checker
// (awaited by Close), at most Scheduler.Capacity at once across every Checker sharing the
// Scheduler. A check's timeout starts when it gets its slot, so queueing never fails a host.
// OnChange is called without locks held.
//
// The cluster manager (cluster/health.go) does the rest: it refuses a gRPC health check on a
// cluster without http2_protocol_options and more than one health check per cluster (as Envoy
// does), waits for every host's first result before the cluster is warm (counting OnChange
// calls), publishes a snapshot when changed is true, and tells its OnHostHealthFailure
// subscribers (pools, TCP proxy) for close_connections_on_host_health_failure.
//
// Not implemented: alt_port (deprecated), custom health checkers, header value %formatters%,
// endpoint-level health-check hostnames (use AddressFor for the port), HTTP/3,
// proxy_protocol_config, event_logger extensions and event_service.
package health
