// Package tracing is the HTTP connection manager's distributed tracing (Envoy's HCM `tracing`
// block): the x-request-id based sampling decision, the downstream span with Envoy's tags, W3C
// trace context propagation (W3C traceparent, B3), and two providers, each exporting from its
// own goroutine: envoy.tracers.opentelemetry (OTLP gRPC to a cluster) and envoy.tracers.zipkin
// (Zipkin v2 JSON POSTed to a cluster).
//
// Implemented HCM tracing fields: provider (envoy.tracers.opentelemetry, envoy.tracers.zipkin), random_sampling,
// client_sampling, overall_sampling (runtime keys tracing.random_sampling,
// tracing.client_enabled, tracing.global_enabled; numerators out of 10000),
// custom_tags (literal, environment, request_header, and metadata of kinds request (dynamic
// metadata), route, cluster and host; host metadata is the endpoint's envoy.lb namespace, one
// key deep, as Legate keeps it: other host namespaces are refused), max_path_tag_length, verbose (the downstream span
// gets the timing events Legate records, under Envoy's names: last_downstream_rx_byte_received,
// first_upstream_tx_byte_sent, first_upstream_rx_byte_received, last_downstream_tx_byte_sent;
// OTLP span events, Zipkin annotations), spawn_upstream_span (a
// CLIENT span "router <cluster> egress" for each attempt of the router's upstream request,
// whose context that attempt carries; the router's start_child_span asks for the same).
//
// Span names and kinds as Envoy's: a listener whose traffic_direction is OUTBOUND makes egress
// spans (CLIENT, "egress <host>"), any other ingress spans (SERVER, "ingress"); Zipkin names
// the span after the request's host. A route's decorator names the span instead and travels
// in x-envoy-decorator-operation (on egress requests, on ingress responses; propagate false
// keeps it home); that header from the previous hop (ingress request, egress response) names
// the span and is not forwarded. A route's tracing block replaces the connection manager's
// three sampling fractions (each defaulting to 100 %) and adds its custom tags.
//
// OpenTelemetryConfig: grpc_service (envoy_grpc, initial_metadata, timeout) or http_service
// (OTLP/HTTP protobuf POSTed to http_uri through its cluster, request_headers_to_add; package
// internal/httpservice), resource_detectors (environment: OTEL_RESOURCE_ATTRIBUTES;
// static_config), sampler (always_on, trace_id_ratio_based, parent_based: it decides instead
// of the connection manager's sampling), service_name,
// max_cache_size (the bounded span buffer; spans beyond it are dropped and counted in
// tracing.opentelemetry.spans_dropped, a Legate counter). Runtime keys
// tracing.opentelemetry.min_flush_spans (5) and tracing.opentelemetry.flush_interval_ms (5000).
//
// ZipkinConfig: collector_service (an HttpService: http_uri's cluster, path, host and
// timeout, request_headers_to_add), or collector_cluster, collector_endpoint,
// collector_endpoint_version HTTP_JSON
// (unset means the same), collector_hostname (the Host of reports), shared_span_context
// (default true: the span keeps the client's B3 span id), trace_id_128bit. B3 is read from the
// x-b3-* headers or the single b3 header and written as x-b3-* headers. Stats tracing.zipkin.*:
// spans_sent, timer_flushed, reports_sent, reports_dropped (non-2xx), reports_failed, and
// Legate's spans_dropped; runtime keys tracing.zipkin.min_flush_spans, flush_interval_ms,
// request_timeout. Refused: HTTP_PROTO and GRPC, split_spans_for_request,
// trace_context_option other than USE_B3, timestamp_trace_ids.
//
// Refused ("not implemented by Legate"): other providers (datadog: its Go tracer is a
// process-wide agent client, not an exporter to a cluster), host metadata tags outside
// envoy.lb, operation, upstream_operation, no_context_propagation, OpenTelemetry exporter,
// other resource detectors and samplers (dynatrace, cel), http_service formatters.
//
// Every request gets a span context, as Envoy's tracers make a span for each: an unsampled one
// goes to the upstream with its sampled flag clear (traceparent flags 00, x-b3-sampled 0) and
// is not exported; a request carrying a context follows its sampled flag.
package tracing
