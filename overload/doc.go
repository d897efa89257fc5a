// Package overload is Envoy's overload manager (bootstrap overload_manager): resource
// monitors whose pressure, read every refresh_interval (default 1 s), feeds threshold and
// scaled triggers, whose highest state is each overload action's.
//
// Monitors: envoy.resource_monitors.fixed_heap (the Go heap's object bytes, from
// runtime/metrics, against max_heap_size_bytes) and
// envoy.resource_monitors.global_downstream_max_connections (the downstream connections of
// every listener without ignore_global_conn_limit, and of the admin without its
// ignore_global_conn_limit, against max_active_downstream_connections; a connection over the
// limit is closed at accept and counted in listener.<prefix>.downstream_global_cx_overflow).
//
// Actions: stop_accepting_requests (503 "envoy overloaded", details "overload", response flag
// OM, http.<prefix>.downstream_rq_overload_close), disable_http_keepalive ("connection: close"
// on HTTP/1, GOAWAY on HTTP/2, http.<prefix>.downstream_cx_overload_disable_keepalive) — both
// with the probability of a scaled state, as Envoy's bernoulli draws —, stop_accepting_connections
// (the accept loops pause while saturated), reject_incoming_connections (closed at accept with
// the state's probability, listener.<prefix>.downstream_cx_overload_reject), shrink_heap
// (while saturated, at once and then every ShrinkHeapConfig.timer_interval, default 10 s,
// debug.FreeOSMemory when the free heap not yet returned holds max_unfreed_memory_bytes,
// default 100 MiB, counted in overload.envoy.overload_actions.shrink_heap.shrink_count) and
// reduce_timeouts with its ScaleTimersOverloadActionConfig: HTTP_DOWNSTREAM_CONNECTION_IDLE,
// HTTP_DOWNSTREAM_STREAM_IDLE, TRANSPORT_SOCKET_CONNECT (downstream TLS handshakes of the
// HTTP connection manager and the TCP proxy) and HTTP_DOWNSTREAM_CONNECTION_MAX, each with
// min_timeout or min_scale; a timer of timeout d and minimum m lasts m + (d-m)×(1-state), as
// Envoy's scaled range timers do, and timers already running move when the state does
// (State.TimersChanged). Listeners with bypass_overload_manager are subject to none of them,
// nor to the global connection limit.
//
// Stats: overload.<monitor>.pressure (percent), failed_updates and skipped_updates;
// overload.<action>.active (1 when saturated) and scale_percent; overload.refresh_interval_delay.
//
// Refused with their path and "not implemented by Legate": every other monitor and action,
// the typed_config of an action other than reduce_timeouts and shrink_heap, reduce_timeouts'
// HTTP_DOWNSTREAM_STREAM_FLUSH (Legate has no stream_flush_timeout), loadshed_points,
// buffer_factory_config and fixed_heap's max_heap_size_bytes_runtime.
//
// Concurrency: Manager.Run's goroutine owns the monitors and actions and is the only writer
// of State's action words; the data path reads them with one atomic load per check.
package overload
