// Package fault is the envoy.filters.http.fault HTTP filter (typed_config
// envoy.extensions.filters.http.fault.v3.HTTPFault): it delays requests, aborts them with an
// HTTP or gRPC status, and slows their responses down, for a configured fraction of requests
// or as request headers ask.
//
// Implemented: delay (fixed_delay, or header_delay read from x-envoy-fault-delay-request in
// milliseconds), abort (http_status, grpc_status, or header_abort read from
// x-envoy-fault-abort-request / x-envoy-fault-abort-grpc-request; response_body, default
// "fault filter abort"), response_rate_limit (fixed_limit in KiB/s, or header_limit read from
// x-envoy-fault-throughput-response), each with its percentage (default 0%) and the
// x-envoy-fault-*-percentage headers for the header-controlled kinds (the header's numerator
// is capped by the configured one); upstream_cluster, headers and downstream_nodes (matched
// against x-envoy-downstream-service-node) select the requests; max_active_faults; the runtime
// keys (delay_percent_runtime, abort_percent_runtime, delay_duration_runtime,
// abort_http_status_runtime, abort_grpc_status_runtime, max_active_faults_runtime,
// response_rate_limit_percent_runtime, with Envoy's fault.http.* defaults) and
// disable_downstream_cluster_stats. The most specific typed_per_filter_config entry (an
// HTTPFault) replaces the filter's settings for its routes.
//
// Not read: Envoy's per-downstream-cluster runtime keys (fault.http.<cluster>.*); the
// configured or global keys decide.
//
// A delayed request waits while its body is buffered (filter.Downstream.Pause); its response
// flag is DI, an aborted one's FI with details fault_filter_abort. Stats, under the connection
// manager's prefix: http.<stat_prefix>.fault.delays_injected, aborts_injected,
// response_rl_injected, faults_overflow, active_faults, and
// fault.<downstream cluster>.delays_injected / aborts_injected for requests with
// x-envoy-downstream-service-cluster.
//
// Concurrency: settings are immutable; a faulted stream has its own filter.Stream, which ends
// the fault (active_faults) when the stream ends and paces the response body on the stream's
// goroutine.
package fault
