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
// Histograms are not sent: Envoy sends every recorded value as it is recorded, which Legate's
// histograms do not report; scale_histogram_units_to_milliseconds is therefore refused.
//
// Concurrency: Flush runs on the stats flusher's goroutine, one call at a time, and owns the
// sink's buffers and connection; Close may run concurrently with it and is serialized by mu.
package statsd
