// Package opentelemetry is the stats sink envoy.stat_sinks.open_telemetry
// (envoy.extensions.stat_sinks.open_telemetry.v3.SinkConfig): at every stats flush it exports
// the used counters, gauges and histograms in one OTLP ExportMetricsServiceRequest over gRPC or HTTP
// (opentelemetry.proto.collector.metrics.v1.MetricsService/Export) to a cluster, shaped as
// Envoy's sink shapes it: one ResourceMetrics with one ScopeMetrics, one Metric per stat;
// gauges as Gauge int points, counters as monotonic Sum int points (cumulative, or with
// report_counters_as_deltas the increments since the previous flush with DELTA temporality),
// histograms as Histogram points with the configured bucket bounds, disjoint bucket counts and
// an overflow bucket (cumulative statistics, or with report_histograms_as_deltas the interval's
// with DELTA temporality). Points carry the flush time and, as their start, the previous
// flush's. Names are tag-extracted names unless use_tag_extracted_name is false, prefixed with
// prefix and a dot when set; tags become string attributes unless emit_tags_as_attributes is
// false. max_data_points_per_request splits a flush into requests of at most that many points.
//
// http_service sends the same request as OTLP/HTTP protobuf, POSTed to its http_uri through the
// cluster (internal/httpservice); resource_detectors (environment, static_config) fill the
// Resource (internal/otelres; empty without detectors, as before).
//
// Refused with "not implemented by Legate": custom_metric_conversions, other resource
// detectors, google_grpc and grpc_service.retry_policy. grpc_service's
// timeout bounds each export and its initial_metadata is sent with it.
//
// Concurrency: Flush runs on the stats flusher's goroutine, one call at a time; each export is
// a unary call bounded by the grpc_service timeout (5 s without one). Close may run
// concurrently; a flush after Close sends nothing.
package opentelemetry
