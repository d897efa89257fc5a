// Package csrf is the envoy.filters.http.csrf HTTP filter (typed_config
// envoy.extensions.filters.http.csrf.v3.CsrfPolicy): for requests that modify state (POST,
// PUT, DELETE, PATCH) it compares the source origin (the host and port of Origin, else of
// Referer) with the destination (the request's host) and answers 403 "Invalid origin"
// (details csrf_origin_mismatch) when they differ and no additional_origins matcher accepts
// the source.
//
// Every CsrfPolicy field is implemented: filter_enabled (required) and shadow_enabled (only
// counted) with their runtime keys, and additional_origins (every StringMatcher). The most
// specific typed_per_filter_config entry (a CsrfPolicy) replaces the filter's policy.
//
// Stats, under the connection manager's prefix: http.<stat_prefix>.csrf.missing_source_origin,
// request_invalid and request_valid.
//
// Concurrency: a Filter and its policies are immutable and safe for concurrent use.
package csrf
