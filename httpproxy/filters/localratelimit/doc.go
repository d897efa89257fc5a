// Package localratelimit is the envoy.filters.http.local_ratelimit HTTP filter (typed_config
// envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit): token buckets shared by
// every connection of the process, checked for a fraction of requests (filter_enabled,
// default none) and enforced for a fraction (filter_enforced, default none) with a local
// reply (429 unless status says otherwise, body and details local_rate_limited, response
// flag RL, x-envoy-ratelimited: true and response_headers_to_add).
//
// The most specific typed_per_filter_config entry of the filter's name (the same
// LocalRateLimit message) replaces the filter's configuration for its routes, with buckets of
// its own, as Envoy.
//
// Implemented: stat_prefix, status, token_bucket (max_tokens, tokens_per_fill default 1,
// fill_interval at least 50ms; tokens are added every fill interval), filter_enabled,
// filter_enforced (runtime keys included), request_headers_to_add_when_not_enforced,
// response_headers_to_add, descriptors with the descriptors the filter's own rate_limits
// produce for its stage (the actions route.CompileRateLimits implements, shared with the
// global rate limit filter; a descriptor entry with an empty value matches any value), always_consume_default_token_bucket (default true) and
// enable_x_ratelimit_headers DRAFT_VERSION_03 (x-ratelimit-limit, -remaining and -reset from
// the bucket that decided).
//
// Refused with "not implemented by Legate": local_rate_limit_per_downstream_connection,
// local_cluster_rate_limit, rate_limited_as_resource_exhausted, vh_rate_limits other than
// OVERRIDE, descriptors without rate_limits (they would read the route's rate_limits, which this
// filter does not read), a descriptor's shadow_mode, and the rate limit actions and options
// route.CompileRateLimits refuses (limit, hits_addend, apply_on_stream_done, disable_key,
// x_ratelimit_option, extension and remote_address_match actions).
//
// Stats: <stat_prefix>.http_local_rate_limit.enabled, enforced, rate_limited and ok, for the
// filter's configuration and for each per-route one (listed on first use and kept while the
// process runs).
//
// Concurrency: a configuration is immutable; each token bucket is guarded by its own mutex,
// held only to refill and take a token.
package localratelimit
