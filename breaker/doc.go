// Package breaker implements Envoy's circuit-breaker resource manager: per routing priority
// (default, high) a bounded count of connections, pending requests, requests, retries and
// connection pools (cluster.CircuitBreakers.Thresholds), with the
// cluster.<name>.circuit_breakers.<priority>.*_open gauges and, with track_remaining, the
// remaining_* gauges.
//
// Concurrency: a Breaker is built once per cluster version by the cluster manager and shared by
// every request of that version. TryAcquire and Release are lock-free and allocate nothing; they
// are safe for concurrent use. Far from the limit a P leases units in batches from the shared
// count and takes and returns them on its own cache line, so a request writes no line another
// core writes; near the limit (less than two batches left) units move one at a time by
// compare-and-swap on the shared count, and an acquisition that finds it at the limit takes
// back the units other Ps hold free before refusing, so max_* is an exact hard cap. Resources
// with track_remaining or a retry budget always count on the shared line (their gauge or limit
// moves with every unit).
// Configured limits are fixed when the Breaker is built (a configuration change builds a new
// Breaker); the runtime keys circuit_breakers.<cluster>.<priority>.max_* override them, read
// from the current runtime snapshot at every acquisition.
package breaker
