// Package ondemand is the envoy.filters.http.on_demand HTTP filter: when a request has no
// route, it asks the management server for what the request lacks — the virtual host of its
// Host header over VHDS ("<route_config_name>/<host>"), or the route configuration of its
// on_demand SRDS scope — pauses the request until the answer has been applied, and lets it go
// on to the router, which resolves the route again (and answers 404 when there still is none).
// A request that has a route, or whose connection manager has nothing to ask for (no vhds, no
// scoped routes), goes on at once. On-demand CDS (odcds) is not implemented by Legate and is
// refused.
//
// Envoy waits for the answer without a bound of its own (only the stream's timeouts end the
// wait); Legate bounds it: after Wait (5 s, the default odcds timeout) the request goes on
// to the router without the update. The filter keeps no stats, as Envoy's keeps none.
//
// While a request waits its body is buffered by the connection manager up to the connection's
// buffer limit, then the client is held back by flow control (Envoy's decodeData answers
// StopIterationAndWatermark: no 413), and the body is forwarded once the request goes on. A
// client that resets or disconnects ends the wait at once: its interest in the update is
// withdrawn and the stream ends unanswered.
//
// Per-route configuration (typed_per_filter_config with PerRouteConfig) is checked and
// registered (Register); Envoy reads it only for requests that already have a route, where
// its one field, odcds, would fetch the route's cluster — which Legate refuses — so it
// changes nothing here.
//
// Concurrency: a Filter is immutable and safe for concurrent use; each paused request blocks
// only its own stream's goroutine. The connection manager and the xDS client make many paused
// requests for one host or scope share one subscription and wake them all together.
package ondemand
