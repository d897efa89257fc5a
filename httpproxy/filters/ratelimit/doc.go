// Package ratelimit is the envoy.filters.http.ratelimit HTTP filter (typed_config
// envoy.extensions.filters.http.ratelimit.v3.RateLimit): Envoy's global rate limiting. For each
// routed request it builds descriptors from rate limit actions and asks the rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit over gRPC, through
// internal/ratelimitsvc, on a channel dialled through the service's cluster) whether the
// request is over a limit.
//
// Descriptors come from the route's typed_per_filter_config RateLimitPerRoute.rate_limits if
// set, else the filter's own rate_limits if set, else the route's rate_limits of the filter's
// stage, with the virtual host's as Envoy decides: always with the route's
// include_vh_rate_limits, else by RateLimitPerRoute.vh_rate_limits (OVERRIDE, the default, reads
// them only when the route has none; INCLUDE; IGNORE). Actions are route.CompileRateLimits'
// (shared with local_ratelimit): source_cluster (--service-cluster), destination_cluster,
// request_headers (first value; pseudo-headers too), query_parameters, remote_address,
// masked_remote_address, generic_key, header_value_match, query_parameter_value_match,
// metadata and dynamic_metadata from the stream's dynamic metadata. A request without a route,
// a routed cluster or descriptors is not checked.
//
// Implemented fields: domain (RateLimitPerRoute.domain overrides it), stage, request_type
// (internal: x-envoy-internal: true), timeout (20 ms by default, 0 none), failure_mode_deny and
// failure_mode_deny_percent, rate_limited_as_resource_exhausted, rate_limit_service
// (envoy_grpc with authority and initial_metadata; transport_api_version V3),
// enable_x_ratelimit_headers DRAFT_VERSION_03 (x-ratelimit-limit with the quota policy,
// -remaining and -reset from the status with the fewest requests left),
// disable_x_envoy_ratelimited_header, rate_limited_status (429 unless at least 400),
// response_headers_to_add, status_on_error (500), stat_prefix, filter_enabled and
// filter_enforced (runtime ratelimit.http_filter_enabled and ratelimit.http_filter_enforcing,
// 100% by default), rate_limits, metadata_namespace and enable_retry_after_header.
//
// An OK answer lets the request on with the service's request_headers_to_add; its
// response_headers_to_add and the x-ratelimit headers go on the response. OVER_LIMIT, when
// enforced, answers rate_limited_status with the service's raw_body, its headers,
// response_headers_to_add and x-envoy-ratelimited: true, details request_rate_limited and
// response flag RL. A failed or timed-out call lets the request on (failure_mode_allowed), or
// with failure_mode_deny answers status_on_error with details rate_limiter_error and flag RLSE.
// The service's dynamic_metadata goes under metadata_namespace (default the filter's name). A
// gRPC request (content-type application/grpc...) is answered 200 with grpc-status
// (UNAVAILABLE for 429, RESOURCE_EXHAUSTED with rate_limited_as_resource_exhausted, Envoy's
// mapping otherwise) and the body as grpc-message.
//
// Refused with "not implemented by Legate": google_grpc, the rate limit service's
// grpc_service.timeout (the filter's timeout bounds the call, as Envoy), retry policies,
// RateLimitPerRoute.override_option, and the rate limit options and actions
// route.CompileRateLimits refuses (limit, hits_addend, apply_on_stream_done, disable_key,
// x_ratelimit_option, descriptor default_value formatting, metadata sources other than DYNAMIC,
// extension and remote_address_match). A stage or dynamic_metadata action on the filter's or a
// route's own rate_limits is refused, as Envoy does not read them there.
//
// Stats: cluster.<route cluster>.ratelimit[.<stat_prefix>].ok, over_limit, error and
// failure_mode_allowed, listed on a cluster's first call and kept while the process runs.
//
// Concurrency: a Filter is immutable after New but for its per-cluster stats cache (a
// sync.Map); the call blocks only its stream's goroutine.
package ratelimit
