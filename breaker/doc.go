// Package breaker implements Envoy's circuit-breaker resource manager: per routing priority
// (default, high) a bounded count of connections, pending requests, requests, retries and
// connection pools (cluster.CircuitBreakers.Thresholds), with the
// cluster.<name>.circuit_breakers.<priority>.*_open gauges and, with track_remaining, the
// remaining_* gauges.
//
// Concurrency: a Breaker is built once per cluster version by the cluster manager and shared by
// every request of that version. TryAcquire and Release are lock-free (a compare-and-swap loop on
// one atomic counter plus gauge stores) and allocate nothing; they are safe for concurrent use.
// Configured limits are fixed when the Breaker is built (a configuration change builds a new
// Breaker); the runtime keys circuit_breakers.<cluster>.<priority>.max_* override them, read
// from the current runtime snapshot at every acquisition.
package breaker
