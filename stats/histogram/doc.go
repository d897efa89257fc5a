// Package histogram is Legate's version of Envoy's histograms: libcircllhist
// log-linear bins (two significant decimal digits, the 2019 arithmetic Envoy
// pins), with the same quantiles, sums, counts and bucket counts, and
// Envoy's interval/cumulative split across stats flushes.
//
// Concurrency: Histogram.Record may be called from any goroutine; it takes
// no lock and, after a value's bin block exists, does not allocate. Counts
// go to per-P shards of atomic counters. Histogram.Flush, run by the stats
// flusher (and by admin with stats_flush_on_admin), drains the shards into
// an immutable Snapshot for the interval and merges it into the cumulative
// one; Flush calls are serialized by a mutex that Record never touches.
// Snapshots are immutable and may be shared freely.
package histogram
