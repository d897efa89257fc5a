// Package healthcheck is the envoy.filters.http.health_check HTTP filter: it recognises
// health-check requests by their headers and answers them from the proxy itself (or, with
// pass_through_mode, lets them through to the upstream), failing them with 503 once the
// server's health checks have been failed by the admin's POST /healthcheck/fail, whatever the
// filter's configuration, and — without pass-through — when a cluster of
// cluster_min_healthy_percentages has too few healthy hosts.
//
// Concurrency: a Filter is immutable after New and safe for concurrent use; it reads the
// server's health flag (an atomic) and cluster snapshots without locks.
package healthcheck
