// Package stats is Legate's statistics store: counters, gauges, histograms and
// text readouts named exactly as Envoy names them, the stats_matcher, tag
// extraction for sinks and Prometheus, recent-lookup tracking, counter reset
// and periodic flushing to sinks.
//
// Stats are struct fields. A component declares a struct of Counter, Gauge,
// Histogram and TextReadout fields tagged with their Envoy names and registers
// a pointer to it under a prefix (Store.Register("cluster.web.", &s)). The
// full name of a stat is the prefix plus the field's name; it is derived when
// rendering and never stored per stat. Field names are computed once per
// struct type and cached in the Store.
//
// Concurrency: incrementing, setting and recording take no lock and allocate
// nothing (atomics only). Registration, unregistration, by-name lookups and
// configuration changes are the control path and hold Store.mu. Rendering
// (Each*, Flush) copies the registration list under Store.mu, releases it and
// then reads atomics, so it never blocks the hot path and holds the lock only
// for the copy.
package stats
