// Package buffer is the envoy.filters.http.buffer HTTP filter (typed_config
// envoy.extensions.filters.http.buffer.v3.Buffer): it reads a request's whole body before the
// request goes on, so that the upstream gets it at once and with its content-length, and
// answers 413 "Payload Too Large" (details request_payload_too_large, counted in
// http.<stat_prefix>.downstream_rq_too_large) to a body over max_request_bytes.
//
// Implemented: max_request_bytes (required), and the per-route BufferPerRoute (disabled, or a
// buffer with its own max_request_bytes) as the most specific typed_per_filter_config entry.
// Every field is implemented. It also runs as an upstream filter (the router's
// upstream_http_filters), once per attempt; a body already read whole is not read again.
//
// Concurrency: a Filter is immutable; the body is read on the stream's goroutine
// (filter.Downstream.BufferBody).
package buffer
