// Package route compiles an Envoy RouteConfiguration (envoy.config.route.v3) into an immutable
// route table and matches requests against it: virtual hosts by domain, routes by path, headers,
// query parameters and runtime fraction, and the resulting action (cluster, weighted clusters,
// cluster header, redirect, direct response) with its rewrites, timeouts, retry and hash
// policies, subset metadata, header mutations and upgrade_configs (Route.UpgradeEnabled,
// Route.Connect).
//
// Concurrency: Compile converts the proto once; the Table and everything reachable from it are
// never modified afterwards and are safe for concurrent use without locks. A new route
// configuration (RDS update) is a new Table, swapped in by the owner. Route and HashKey do not
// allocate in the common case.
//
// Not implemented (Compile rejects them with an error rather than routing wrongly):
// path_match_policy, tls_context, dynamic_metadata, filter_state and cookies matches,
// cluster_specifier_plugin, host_rewrite_path_regex, filter_state hash policies, vhds,
// retry priorities other than previous_priorities (RetryPolicy.PriorityUpdateFrequency), and
// retry host predicates other than previous_hosts and omit_canary_hosts.
// typed_per_filter_config (at every level) is compiled through Options.PerFilterConfig and
// found with Match.PerFilterConfig; FilterConfig.disabled takes the filter out of the chain
// for requests on that route (Match.FilterDisabled, Table.DisablesFilters).
// request_mirror_policies compile into Route.Mirrors (request_headers_mutations refused).
// The deprecated cors fields of virtual hosts and routes go through Options.PerFilterConfig as
// entries of the CORS filter's CorsPolicy type (Match.LegacyCors).
// decorator and tracing compile into Route.Decorator and Route.Tracing (the connection
// manager names and samples spans with them).
// The rate_limits of virtual hosts and routes (and include_vh_rate_limits) compile into
// RateLimit descriptors' actions (CompileRateLimits) for the rate limit filters; the actions
// and options Legate does not implement are refused.
// A virtual host's matcher (the unified matcher API, internal/matcher) replaces its routes:
// its actions are envoy.config.route.v3.Route or RouteList, compiled as routes are, and the
// first route of the matched action whose own match matches serves; its inputs come from
// Options.Extensions (Register adds envoy.matching.inputs.request_headers, whose
// header_name may be a pseudo-header). Other inputs and actions are refused with their path.
//
// Nothing is silently ignored: routeFields (fields.go) decides every field of
// RouteConfiguration, VirtualHost, Route, RouteAction, RetryPolicy (and its retry_back_off),
// RedirectAction, DirectResponseAction, WeightedCluster (and its clusters), RouteMatch,
// HeaderMatcher and QueryParameterMatcher, and Compile first refuses, wherever it sits, a set
// field the table refuses or does not decide, with "<path>: not implemented by Legate"
// (TestRouteFieldsDecided fails for a field a go-control-plane upgrade adds). Refused when set:
//   - RouteConfiguration: internal_only_headers, request_mirror_policies, vhost_header,
//     ignore_path_parameters_in_path_matching, route_specifiers;
//   - VirtualHost: virtual_clusters (Legate keeps no vhost.<vh>.vcluster.* stats),
//     include_is_timeout_retry_header, retry_policy_typed_config, request_mirror_policies,
//     per_request_buffer_limit_bytes and request_body_buffer_limit (the replay buffer is the
//     listener's per_connection_buffer_limit_bytes), route_specifiers;
//   - Route: stat_prefix, per_request_buffer_limit_bytes, request_body_buffer_limit,
//     route_specifiers;
//   - RouteAction: internal_redirect_policy, internal_redirect_action HANDLE_INTERNAL_REDIRECT,
//     max_stream_duration.max_stream_duration other than zero, append_x_forwarded_host, flush_timeout,
//     early_data_policy, retry_policy_typed_config, path_rewrite, host_rewrite;
//   - RetryPolicy: rate_limited_retry_back_off, refresh_cluster_on_retry;
//   - WeightedCluster: runtime_key_prefix.
//
// Implemented beyond the basics because control planes set them on every route (Istio):
// include_request_attempt_count and include_attempt_count_in_response (x-envoy-attempt-count
// on each upstream attempt and on the response: Route.AttemptCount), max_stream_duration's
// grpc_timeout_header_max and grpc_timeout_header_offset and the deprecated max_grpc_timeout
// and grpc_timeout_offset (a gRPC request's timeout is its grpc-timeout header, capped by a
// positive max, less the offset; none without the header: Route.GRPCTimeout), and
// cluster_not_found_response_code (Route.ClusterNotFoundCode).
//
// hedge_policy (virtual host and route) is refused only when it would hedge: initial_requests
// above 1, a non-zero additional_request_chance or hedge_on_per_try_timeout; Envoy's default
// policy sends one request, as Legate does. Accepted without effect, as they steer no request:
// the metadata of route configurations and virtual hosts (nothing reads them) and
// max_internal_redirects (meaningful only with the refused internal redirect handling).
package route
