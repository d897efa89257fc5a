// Package metricsservice is the stats sink envoy.stat_sinks.metrics_service
// (envoy.config.metrics.v3.MetricsServiceConfig): at every stats flush it streams the used
// counters, gauges and histograms as Prometheus MetricFamily messages over Envoy's gRPC
// MetricsService (StreamMetrics) to a cluster, as Envoy's sink does: counters as totals or,
// with report_counters_as_deltas, as the increments since the previous flush; gauges; each
// histogram's interval statistics as a SUMMARY (Envoy's ten quantiles) and/or a HISTOGRAM
// (cumulative counts of the configured buckets), per histogram_emit_mode. Names are full stat
// names or, with emit_tags_as_labels, tag-extracted names with the tags as labels. The first
// message of each stream carries the node. batch_size splits a flush into messages of at most
// that many families.
//
// Concurrency: Flush runs on the stats flusher's goroutine, one call at a time; Close may run
// concurrently and both serialise on mu. The stream is opened at the first flush and again at
// the flush after a failed send; a flush with no stream open sends nothing more.
package metricsservice
