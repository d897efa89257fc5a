// Package statsd is the stats sinks envoy.stat_sinks.statsd (envoy.config.metrics.v3.StatsdSink)
// and envoy.stat_sinks.dog_statsd (DogStatsdSink): at every stats flush each used counter is
// sent as "<prefix>.<name>:<delta>|c" and each used gauge as "<prefix>.<name>:<value>|g",
// the prefix being "envoy" unless configured, as Envoy's sinks send them.
//
// The statsd sink sends stats by their full names, one line per UDP datagram, or as
// newline-terminated lines over one TCP connection to a host of tcp_cluster_name. The DogStatsD
// sink sends tag-extracted names followed by their tags ("|#name:value,…", tags as
// stats_config extracts them) over UDP, packing lines, separated by newlines, into datagrams
// of at most max_bytes_per_datagram bytes.
//
// Histogram values are sent one by one as they are recorded, as Envoy sends them:
// "<prefix>.<name>:<value>|ms" (the raw value, whatever the unit) or "|h" with a fraction for
// percent histograms. Over UDP each goes at once in its own datagram; over TCP they are sent
// with the next flush, so that a slow collector never holds up a request.
// scale_histogram_units_to_milliseconds is not implemented and is refused.
//
// Concurrency: Flush runs on the stats flusher's goroutine, one call at a time, and owns the
// sink's buffers and connection; Close may run concurrently with it and is serialized by mu.
// OnHistogramComplete runs on any recording goroutine: over UDP it writes its own datagram
// from a pooled buffer; over TCP it appends to a bounded buffer under histMu, which Flush
// takes without holding it during the write.
package statsd
