// Package tracing is the HTTP connection manager's distributed tracing (Envoy's HCM `tracing`
// block): the x-request-id based sampling decision, the downstream span with Envoy's tags, W3C
// trace context propagation, and the envoy.tracers.opentelemetry provider, which batches spans
// on its own goroutine and exports them over OTLP gRPC to a cluster.
//
// Implemented HCM tracing fields: provider (envoy.tracers.opentelemetry), random_sampling,
// client_sampling, overall_sampling (runtime keys tracing.random_sampling,
// tracing.client_enabled, tracing.global_enabled; numerators out of 10000),
// custom_tags (literal, environment, request_header), max_path_tag_length, verbose (accepted:
// Legate records no per-filter span events, so it changes nothing), spawn_upstream_span (false
// only).
//
// OpenTelemetryConfig: grpc_service (envoy_grpc, initial_metadata, timeout), service_name,
// max_cache_size (the bounded span buffer; spans beyond it are dropped and counted in
// tracing.opentelemetry.spans_dropped, a Legate counter). Runtime keys
// tracing.opentelemetry.min_flush_spans (5) and tracing.opentelemetry.flush_interval_ms (5000).
//
// Refused ("not implemented by Legate"): other providers (zipkin, datadog, …), custom_tags
// metadata, spawn_upstream_span true, operation, upstream_operation, no_context_propagation,
// OpenTelemetry http_service, exporter, resource_detectors and sampler.
//
// A request that is not sampled and has no traceparent gets no span and no traceparent (Envoy
// propagates an unsampled context); one with a traceparent follows the parent's sampled flag,
// as Envoy's OpenTelemetry tracer does.
package tracing
