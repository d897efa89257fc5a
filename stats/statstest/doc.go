// Package statstest builds stats stores for tests and benchmarks, such as
// the 1M-counter store that Envoy's own admin speed test uses. Test-only;
// the stores it returns are ordinary, concurrency-safe stats.Stores.
package statstest
