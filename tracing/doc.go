// Package tracing is the HTTP connection manager's distributed tracing (Envoy's HCM `tracing`
// block): the x-request-id based sampling decision, the downstream span with Envoy's tags, W3C
// trace context propagation (W3C traceparent, B3), and two providers, each exporting from its
// own goroutine: envoy.tracers.opentelemetry (OTLP gRPC to a cluster) and envoy.tracers.zipkin
// (Zipkin v2 JSON POSTed to a cluster).
//
// Implemented HCM tracing fields: provider (envoy.tracers.opentelemetry, envoy.tracers.zipkin), random_sampling,
// client_sampling, overall_sampling (runtime keys tracing.random_sampling,
// tracing.client_enabled, tracing.global_enabled; numerators out of 10000),
// custom_tags (literal, environment, request_header), max_path_tag_length, verbose (accepted:
// Legate records no per-filter span events, so it changes nothing), spawn_upstream_span (one
// CLIENT span "router <cluster> egress" for the router's upstream request, all attempts
// included; Envoy makes one per attempt; the router's start_child_span asks for the same).
//
// OpenTelemetryConfig: grpc_service (envoy_grpc, initial_metadata, timeout), service_name,
// max_cache_size (the bounded span buffer; spans beyond it are dropped and counted in
// tracing.opentelemetry.spans_dropped, a Legate counter). Runtime keys
// tracing.opentelemetry.min_flush_spans (5) and tracing.opentelemetry.flush_interval_ms (5000).
//
// ZipkinConfig: collector_cluster, collector_endpoint, collector_endpoint_version HTTP_JSON
// (unset means the same), collector_hostname (the Host of reports), shared_span_context
// (default true: the span keeps the client's B3 span id), trace_id_128bit. B3 is read from the
// x-b3-* headers or the single b3 header and written as x-b3-* headers. Stats tracing.zipkin.*:
// spans_sent, timer_flushed, reports_sent, reports_dropped (non-2xx), reports_failed, and
// Legate's spans_dropped; runtime keys tracing.zipkin.min_flush_spans, flush_interval_ms,
// request_timeout. Refused: HTTP_PROTO and GRPC, collector_service, split_spans_for_request,
// trace_context_option other than USE_B3, timestamp_trace_ids.
//
// Refused ("not implemented by Legate"): other providers (datadog, …), custom_tags
// metadata, operation, upstream_operation, no_context_propagation,
// OpenTelemetry http_service, exporter, resource_detectors and sampler.
//
// A request that is not sampled and carries no context gets no span and no context headers
// (Envoy propagates an unsampled context); one with a context follows its sampled flag, as
// Envoy's tracers do.
package tracing
